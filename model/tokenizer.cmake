# model/tokenizer.cmake — what model/tokenizer.c needs: utf8proc (Debian libutf8proc-dev) for
# NFD and case mapping. Included from model/CMakeLists.txt.
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
target_link_libraries(modattn_model PUBLIC PkgConfig::UTF8PROC)
