# Writes a C++ source that holds the bytes of a file as a char array, so that any byte (quotes,
# backslashes, NULs, ")"-sequences that would end a raw string) survives.
#   cmake -DINPUT=<file> -DOUTPUT=<file.cc> -DHEADER=<include path> -DNAMESPACE=<ns>
#         -DFUNCTION=<name> -P embed_file.cmake
# The generated function is `absl::string_view FUNCTION()`, declared in HEADER.
foreach(var INPUT OUTPUT HEADER NAMESPACE FUNCTION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_file.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
set(rows "")
set(row_chars 32)  # 16 bytes a line
set(offset 0)
while(offset LESS hex_length)
  string(SUBSTRING "${hex}" ${offset} ${row_chars} chunk)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," chunk "${chunk}")
  string(APPEND rows "    ${chunk}\n")
  math(EXPR offset "${offset} + ${row_chars}")
endwhile()
math(EXPR size "${hex_length} / 2")

set(content "// Generated from ${INPUT} by embed_file.cmake: do not edit.
#include \"${HEADER}\"

namespace ${NAMESPACE} {
namespace {

// ${size} bytes and a terminating NUL (not part of the document).
constexpr char kBytes[] = {
${rows}    '\\0'};

}  // namespace

absl::string_view ${FUNCTION}() { return absl::string_view(kBytes, sizeof(kBytes) - 1); }

}  // namespace ${NAMESPACE}
")

# Only rewrite when the bytes changed, so that an unchanged document rebuilds nothing.
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUTPUT}" "${content}")
endif()
