# The `hil` runner profile: upstream's enn_executor_runner plus the XNNPACK delegate and the
# quantized kernels, so the host flows (xnnpack, portable, A8W8 included) run on a board's CPU
# beside the NPU. scripts/build-enn.sh --runner-profile hil includes this file in the CMake
# project that defines enn_executor_runner, with EXECUTORCH_BUILD_XNNPACK=ON and
# EXECUTORCH_BUILD_KERNELS_QUANTIZED=ON in ExecuTorch's build. ExecuTorch's own files are not
# edited:
#   tree layout (ExecuTorch 1.5.1): CMAKE_PROJECT_executorch_INCLUDE (the top-level project is
#     `executorch`), and backends/samsung/CMakeLists.txt defines the runner with upstream's link
#     line (enn_logging enn_backend gflags executorch extension_data_loader portable_ops_lib
#     android); both libraries carry whole-archive link options of their own
#     (executorch_target_link_options_shared_lib in backends/xnnpack/CMakeLists.txt and
#     gen_operators_lib), so their backend and kernel registrations are kept;
#   examples layout (newer ExecuTorch): CMAKE_PROJECT_INCLUDE of examples/samsung/CMakeLists.txt,
#     a project of its own that finds the build's install (find_package(executorch)): the two
#     libraries are the install's exported targets, their link options exported with them.
# At the end of the top-level CMakeLists.txt, once the runner is defined, the deferred call below
# adds the two libraries.
include_guard(GLOBAL)

function(hil_link_runner_profile)
  foreach(target enn_executor_runner xnnpack_backend quantized_ops_lib)
    if(NOT TARGET ${target})
      message(FATAL_ERROR
        "hil runner profile: target ${target} is not defined (needs EXECUTORCH_BUILD_ENN, "
        "EXECUTORCH_BUILD_XNNPACK and EXECUTORCH_BUILD_KERNELS_QUANTIZED ON)")
    endif()
  endforeach()
  target_link_libraries(enn_executor_runner PRIVATE xnnpack_backend quantized_ops_lib)
  message(STATUS "hil runner profile: enn_executor_runner also links xnnpack_backend quantized_ops_lib")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL hil_link_runner_profile)
