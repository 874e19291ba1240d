# cmake -DIN=file -DOUT=file.c [-DVAR=name] -P embed.cmake: the bytes of IN as VAR[] (default
# srv_openapi_json) and VAR_len in OUT, NUL-terminated.
if(NOT DEFINED VAR)
  set(VAR srv_openapi_json)
endif()
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from ${IN} by server/embed.cmake */\n#include <stddef.h>\nconst char ${VAR}[] = {\n${body}0x00};\nconst size_t ${VAR}_len = ${bytes};\n")
