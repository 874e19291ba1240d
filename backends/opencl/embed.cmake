# Turns text files (IN, a ;-list, concatenated) into a C header holding them as one
# NUL-terminated char array named NAME.
set(all "")
foreach(f ${IN})
  file(READ ${f} part)
  string(APPEND all "${part}\n")
endforeach()
file(WRITE ${OUT}.txt "${all}")
file(READ ${OUT}.txt hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* generated from the OpenCL kernel sources: do not edit */\nstatic const char ${NAME}[] = {\n${bytes}0x00};\n")
