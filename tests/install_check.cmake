# ctest Install.InstalledBinaryRuns: `cmake --install` into a scratch prefix,
# then the installed binary must load the LibTorch it was built against (the
# primary build's lives in .venv inside the source tree, which
# CMAKE_INSTALL_RPATH_USE_LINK_PATH alone leaves out of the install RPATH)
# and find its installed rule files.
# Arguments: -DBUILD=<build dir> -DPREFIX=<scratch prefix> -DTORCH_VERSION=<x.y.z>
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${PREFIX}"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}): ${err}")
endif()
execute_process(COMMAND "${PREFIX}/bin/normdoctor" -V
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "libtorch ${TORCH_VERSION}")
  message(FATAL_ERROR "installed normdoctor -V: exit ${rc}, expected libtorch ${TORCH_VERSION}:\n${out}${err}")
endif()
execute_process(COMMAND "${PREFIX}/bin/normdoctor" rules --format json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"BN001\"")
  message(FATAL_ERROR "installed normdoctor rules: exit ${rc}, the installed rules not found:\n${err}")
endif()
file(REMOVE_RECURSE "${PREFIX}")
