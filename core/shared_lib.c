/* core/shared_lib.c — the static library is the layers' objects, and libmodattn.so is the static
 * library's objects linked whole (CMakeLists.txt); CMake wants one source of its own for a library
 * target, and this is it, for both. */
typedef int modattn__shared_lib_unit; /* an empty translation unit is not ISO C */
