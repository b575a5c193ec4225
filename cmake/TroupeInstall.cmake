# `cmake --install build --prefix P`: the six libraries (libtroupe_core.so, libtroupe_devices.so,
# libtroupe_graph.so, libtroupe_ops.so, libtroupe_actors.so, libtroupe_train.so; and the CUDA
# module, when built) in P/lib, the public headers under P/include/troupe/ in the source layout,
# the programs in P/bin, a CMake package (find_package(Troupe CONFIG) -> Troupe::troupe, which
# links the six) and
# troupe.pc. Nothing installed refers to the build tree, and every path is relative to P, so the prefix may move.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The public headers: every header of these folders except the internal ones below, which
# include CAF, Cap'n Proto or oneDNN, and those of the executor (actors/executor/).
# A program using Troupe then needs only fmt's headers besides ours; tools/examples.sh checks
# that no installed header reaches the others.
set(TROUPE_INTERNAL_HEADERS
  actors/cluster/cluster_checkpoint.hpp actors/cluster/cluster_messages.hpp actors/cluster/master.hpp
  actors/cluster/tensor_transfer.hpp actors/cluster/member_rendezvous.hpp actors/session_impl.hpp actors/signature.hpp
  actors/cluster/worker.hpp actors/cluster/inbox.hpp actors/cluster/outbox.hpp actors/cluster/member_context.hpp
  actors/device_actor.hpp actors/messages.hpp actors/caf_internals.hpp
  actors/state/param_shard.hpp actors/state/queue_actor.hpp actors/runtime.hpp actors/scheduler.hpp
  actors/trace/slow_step_watch.hpp actors/cluster/tls_watch.hpp actors/timeouts.hpp actors/trace/wait_chain.hpp core/checkpoint_internal.hpp core/wire/convert.hpp ops/nn/dnnl.hpp)
file(GLOB_RECURSE TROUPE_PUBLIC_HEADERS CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
     actors/*.hpp core/*.hpp devices/*.hpp graph/*.hpp ops/*.hpp train/*.hpp)
list(REMOVE_ITEM TROUPE_PUBLIC_HEADERS ${TROUPE_INTERNAL_HEADERS})
list(FILTER TROUPE_PUBLIC_HEADERS EXCLUDE REGEX "^actors/executor/")
foreach(header IN LISTS TROUPE_PUBLIC_HEADERS)
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/troupe/${dir})
endforeach()

# The programs find the libraries beside them; DT_RPATH (not RUNPATH, see the top-level file)
# also covers the libraries' own dependencies. Each library finds the layers below it beside
# itself ($ORIGIN) and keeps the directories outside the system's it was linked from
# (OpenBLAS's, CUDA's for the module).
file(RELATIVE_PATH _troupe_bin_to_lib /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
set(_troupe_programs troupe-demo troupe-fashion-mnist troupe-checkpoint troupe-node troupe-cluster-demo
                     troupe-launch troupe-trace)
if(TROUPE_BUILD_BENCH)
  list(APPEND _troupe_programs troupe-bench)
endif()
set(_troupe_libraries troupe_core troupe_devices troupe_graph troupe_ops troupe_actors troupe_train)
set_target_properties(${_troupe_programs} PROPERTIES INSTALL_RPATH "$ORIGIN/${_troupe_bin_to_lib}")
set_target_properties(${_troupe_libraries} PROPERTIES INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS ${_troupe_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Troupe::troupe is the interface target linking the six (the top-level file).
install(TARGETS ${_troupe_libraries} troupe EXPORT TroupeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/troupe)
# devices/cuda_module.cpp loads the module from the directory libtroupe_devices.so was loaded
# from.
if(TARGET troupe_cuda)
  set_target_properties(troupe_cuda PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS troupe_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# `programs`: everything `cmake --install` installs and nothing else (not the tests): what
# tools/run.sh builds, so that every program the docs name exists and the install works.
add_custom_target(programs)
add_dependencies(programs ${_troupe_programs} ${_troupe_libraries})
if(TARGET troupe_cuda)
  add_dependencies(programs troupe_cuda)
endif()

# The license, where the package's other documents would go.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/troupe)

set(_troupe_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Troupe)
install(EXPORT TroupeTargets NAMESPACE Troupe:: DESTINATION ${_troupe_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TroupeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/TroupeConfig.cmake
                              INSTALL_DESTINATION ${_troupe_cmake_dir})
# 0.x: a minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TroupeConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TroupeConfig.cmake ${PROJECT_BINARY_DIR}/TroupeConfigVersion.cmake
        DESTINATION ${_troupe_cmake_dir})

# troupe.pc finds the prefix from its own place (${pcfiledir}), as the prefix is only known
# at install time (cmake --install --prefix).
file(RELATIVE_PATH TROUPE_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" TROUPE_PC_TO_PREFIX "${TROUPE_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/troupe.pc.in ${PROJECT_BINARY_DIR}/troupe.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/troupe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
