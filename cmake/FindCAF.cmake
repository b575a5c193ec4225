# Finds the C++ Actor Framework as Debian ships it (no CMake config, no pkg-config file).
# Defines CAF::core, CAF::io and CAF::openssl (its TLS transport), and CAF_VERSION (e.g. 1706).
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
find_library(CAF_IO_LIBRARY caf_io)
find_library(CAF_OPENSSL_LIBRARY caf_openssl)
if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line REGEX "#define CAF_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+" CAF_VERSION "${_caf_version_line}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF REQUIRED_VARS CAF_INCLUDE_DIR CAF_CORE_LIBRARY CAF_IO_LIBRARY CAF_OPENSSL_LIBRARY
                                  VERSION_VAR CAF_VERSION)
if(CAF_FOUND AND NOT TARGET CAF::core)
  find_package(Threads REQUIRED)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(CAF::io UNKNOWN IMPORTED)
  set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
    INTERFACE_LINK_LIBRARIES CAF::core)
  find_package(OpenSSL REQUIRED)
  add_library(CAF::openssl UNKNOWN IMPORTED)
  set_target_properties(CAF::openssl PROPERTIES IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
    INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL")
endif()
