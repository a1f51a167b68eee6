# cmake -DIN=nn.dtl -DOUT=file.cc -P embed.cmake: writes the text as a C++ raw string.
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from stdlib/nn.dtl; do not edit.\nnamespace dtl::sema {\nextern const char* const kStdlibSource;\nconst char* const kStdlibSource = R\"dtl_stdlib(${text})dtl_stdlib\";\n}\n")
