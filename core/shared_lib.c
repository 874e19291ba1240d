/* core/shared_lib.c — libmodattn.so is the static library's objects linked whole (CMakeLists.txt);
 * CMake wants one source of its own for a library target, and this is it. */
typedef int modattn__shared_lib_unit; /* an empty translation unit is not ISO C */
