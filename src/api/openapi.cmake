# Included from src/api/CMakeLists.txt.
#
# abox_openapi: docs/openapi.yaml compiled in as bytes (OpenApiYaml() in openapi_document.h). The
# .cc is generated at build time and regenerated whenever the YAML or the generator changes.
set(ABOX_OPENAPI_YAML ${PROJECT_SOURCE_DIR}/docs/openapi.yaml)
set(ABOX_OPENAPI_CC ${CMAKE_CURRENT_BINARY_DIR}/openapi_document.cc)
add_custom_command(
  OUTPUT ${ABOX_OPENAPI_CC}
  COMMAND ${CMAKE_COMMAND} -DINPUT=${ABOX_OPENAPI_YAML} -DOUTPUT=${ABOX_OPENAPI_CC}
          -DHEADER=src/api/openapi_document.h -DNAMESPACE=abox::api -DFUNCTION=OpenApiYaml
          -P ${CMAKE_CURRENT_SOURCE_DIR}/embed_file.cmake
  DEPENDS ${ABOX_OPENAPI_YAML} ${CMAKE_CURRENT_SOURCE_DIR}/embed_file.cmake
  COMMENT "Embedding docs/openapi.yaml"
  VERBATIM)
add_library(abox_openapi STATIC ${ABOX_OPENAPI_CC})
abox_apply_host_flags(abox_openapi)
target_link_libraries(abox_openapi PUBLIC absl::strings)

# abox_openapi_check: the contract checker for tests (yaml-cpp, which aboxd does not link):
# the document's operations, its path parameters and responses, and a diff against the routes
# a Router serves.
if(ABOX_BUILD_TESTS)
  find_package(yaml-cpp REQUIRED)
  add_library(abox_openapi_check STATIC openapi_check.cc)
  abox_apply_host_flags(abox_openapi_check)
  target_link_libraries(abox_openapi_check
    PUBLIC abox_base absl::status absl::statusor absl::strings
    PRIVATE yaml-cpp)
  abox_test(openapi_check_test SOURCES openapi_check_test.cc LIBS abox_openapi_check abox_openapi)
endif()
