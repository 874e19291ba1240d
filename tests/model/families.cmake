# tests/model: the engine on BERT models other than all-MiniLM-L6-v2 (a real CLS-pooling
# bge-small-en-v1.5 with dequantized int8 weights, and a small random BERT of other sizes without
# Normalize) against sentence-transformers' goldens. Needs `make model`; fails without it.
modattn_test(test_second_model test_second_model.c)

# ctest labels (docs/ARCHITECTURE.md; modattn_test adds unit)
modattn_label(slow test_second_model)

# the other encoder families (xlm-roberta, distilbert, mpnet): three tiny random models of
# tools/make_tiny_models.py, and all-mpnet-base-v2 from PyPI (slow: 12 layers of 768)
add_executable(test_model_families test_model_families.c)
target_link_libraries(test_model_families PRIVATE modattn)
target_include_directories(test_model_families PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests)
foreach(part tiny mpnet qwen)
  add_test(NAME test_model_families_${part} COMMAND test_model_families ${part} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_model_families_${part} PROPERTIES ENVIRONMENT "MODATTN_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endforeach()
modattn_label(unit test_model_families_tiny)
modattn_label(unit test_model_families_qwen)
modattn_label("unit;slow" test_model_families_mpnet)
# `modattn embed --model DIR` on each of them against the goldens
add_test(NAME cli_model_families COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli_model_families.sh $<TARGET_FILE:modattn_cli>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
modattn_label(cli cli_model_families)
