# Tokenizer tests: goldens from Hugging Face tokenizers (tools/make_token_goldens.py), unit and
# error-path tests on a small committed tokenizer.json, and a speed measurement.
modattn_test(test_tokenizer_golden test_tokenizer_golden.c)
# long texts with nowhere obvious to cut: exact against HF, in bounded memory (issue 18, class 6)
modattn_test(test_tokenizer_long test_tokenizer_long.c)
# SentencePiece Unigram (XLM-R family): goldens on committed fixtures, refusals, damaged charsmaps
modattn_test(test_tokenizer_unigram test_tokenizer_unigram.c)
# byte-level BPE (GPT-2, Qwen2/Qwen3, ModernBERT/NeoX layouts): goldens on committed fixtures,
# refusals of unknown split patterns and damaged merges, a 1 MiB word in bounded time
modattn_test(test_tokenizer_bpe test_tokenizer_bpe.c)
# ids back to text (ByteLevel, WordPiece, none) against tokenizers' decode on the BPE goldens' ids
modattn_test(test_tokenizer_decode test_tokenizer_decode.c)
# the fuzz target's seed corpus again, through the Unigram tokenizer (invariants: ids in range,
# offsets inside the text, <s> ... </s>, truncation keeps a prefix)
if(TARGET replay_tokenizer OR EXISTS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_tokenizer.c)
  add_test(NAME fuzz_replay_tokenizer_unigram
           COMMAND replay_tokenizer ${CMAKE_SOURCE_DIR}/fuzz/corpus/tokenizer
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(fuzz_replay_tokenizer_unigram PROPERTIES
                       ENVIRONMENT "MODATTN_FUZZ_TOKENIZER=tests/fixtures/tokenizer_unigram.json" LABELS unit)
  # and through the byte-level BPE ones (Qwen2: NFC + Split + ByteLevel; ModernBERT: [CLS]/[SEP])
  foreach(bpe qwen2 modernbert)
    add_test(NAME fuzz_replay_tokenizer_bpe_${bpe}
             COMMAND replay_tokenizer ${CMAKE_SOURCE_DIR}/fuzz/corpus/tokenizer
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(fuzz_replay_tokenizer_bpe_${bpe} PROPERTIES
                         ENVIRONMENT "MODATTN_FUZZ_TOKENIZER=tests/fixtures/tokenizer_bpe_${bpe}.json" LABELS unit)
  endforeach()
endif()
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_unit.c)
  modattn_test(test_tokenizer_unit test_tokenizer_unit.c)
  # its linear-time bound on 2 MiB hostile inputs is a timing (5 s, about 25x the plain run): alone,
  # so that a parallel test under the sanitizers cannot make it flake (the early stop is a count)
  set_tests_properties(test_tokenizer_unit PROPERTIES RUN_SERIAL TRUE)
endif()
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/bench_tokenizer.c)
  add_executable(bench_tokenizer bench_tokenizer.c)
  target_link_libraries(bench_tokenizer PRIVATE modattn)
endif()

# ~1.5 MB multilingual texts against tokenizers' ids and offsets, and the scratch bound: about 20 s here
modattn_label(slow test_tokenizer_long)
