# cmake/layers.cmake — the library is built as one CMake OBJECT library per layer (docs/ARCHITECTURE.md):
# each layer's target links (target_link_libraries) exactly the layers below it that it may use, and
# gets its third-party libraries itself. The static archive `modattn` and libmodattn.so are
# assembled from all of them. tools/check_layers.py checks the order (tools/layers.txt) on the
# sources' #include graph and on these objects' symbols (ctest: layers).

# modattn_add_layer(<target> LAYER <name> [SOURCES ...]): an object library of the layer <name>
# (the name tools/layers.txt gives it), position-independent (the same objects make the shared
# library and the Python extension). -fno-semantic-interposition keeps GCC inlining our own
# functions as in a non-PIC build (no one interposes modattn's symbols).
function(modattn_add_layer target)
  cmake_parse_arguments(L "" "LAYER" "SOURCES" ${ARGN})
  add_library(${target} OBJECT ${L_SOURCES})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON MODATTN_LAYER "${L_LAYER}")
  target_compile_options(${target} PRIVATE $<$<C_COMPILER_ID:GNU>:-fno-semantic-interposition>)
  # the public headers for everyone; the source tree (for "layer/private.h") and the generated
  # headers for the library's own files only
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                       PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  set_property(GLOBAL APPEND PROPERTY MODATTN_LAYER_TARGETS ${target})
endfunction()
