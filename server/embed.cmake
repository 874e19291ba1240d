# cmake -DIN=file -DOUT=file.c -P embed.cmake: the bytes of IN as srv_openapi_json[] in OUT.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* generated from server/openapi.json by server/embed.cmake */\n#include <stddef.h>\nconst char srv_openapi_json[] = {\n${body}0x00};\nconst size_t srv_openapi_json_len = ${bytes};\n")
