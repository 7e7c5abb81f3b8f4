# The `hil` runner profile: upstream's enn_executor_runner plus the XNNPACK delegate and the
# quantized kernels, so the host flows (xnnpack, portable, A8W8 included) run on a board's CPU
# beside the NPU. scripts/build-enn.sh --runner-profile hil passes this file as
# CMAKE_PROJECT_executorch_INCLUDE (ExecuTorch's top-level project is `executorch`) together
# with EXECUTORCH_BUILD_XNNPACK=ON and EXECUTORCH_BUILD_KERNELS_QUANTIZED=ON. ExecuTorch's own
# files are not edited: at the end of the top-level CMakeLists.txt, once
# backends/samsung/CMakeLists.txt has defined enn_executor_runner with upstream's link line
# (enn_logging enn_backend gflags executorch extension_data_loader portable_ops_lib android),
# the deferred call below adds the two libraries. Both carry whole-archive link options of
# their own (executorch_target_link_options_shared_lib in backends/xnnpack/CMakeLists.txt and
# the top-level CMakeLists.txt), so their backend and kernel registrations are kept.
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
