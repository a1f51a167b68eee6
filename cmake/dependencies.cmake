# Required and optional dependencies. Everything required comes from Debian
# packages installed by scripts/setup.sh.
find_package(Java COMPONENTS Runtime REQUIRED)
find_program(DTL_ANTLR4_JAR_DIR NAMES antlr4 REQUIRED)
find_package(antlr4-runtime CONFIG REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)

if(DTL_TESTS)
  find_package(GTest REQUIRED)
endif()
find_package(benchmark QUIET)

# CUDA toolkit at /usr/local/cuda: optional. Nothing GPU runs in this issue's
# scope; the summary says whether a later backend could be built.
set(DTL_HAVE_CUDA OFF)
if(NOT DTL_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET PATHS /usr/local/cuda)
  if(NOT CUDAToolkit_FOUND AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CUDAToolkit_ROOT /usr/local/cuda)
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    set(DTL_HAVE_CUDA ON)
  elseif(DTL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DTL_CUDA=ON but no CUDA toolkit was found (looked in /usr/local/cuda)")
  endif()
endif()

set(DTL_HAVE_MPI OFF)
if(NOT DTL_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(DTL_HAVE_MPI ON)
  elseif(DTL_MPI STREQUAL "ON")
    message(FATAL_ERROR "DTL_MPI=ON but MPI was not found (apt-get install libopenmpi-dev)")
  endif()
endif()

find_path(DTL_GLOO_INCLUDE gloo/allreduce.h)
find_library(DTL_GLOO_LIB gloo)
find_path(DTL_DNNL_INCLUDE oneapi/dnnl/dnnl.h)

# libFuzzer needs clang; the fuzz target is built only when CXX is clang or a
# clang++ is found for the separate fuzz build (see fuzz/CMakeLists.txt).
find_program(DTL_CLANGXX NAMES clang++-14 clang++)

# LLVM 16 (llvm-16-dev): the kernel generator in compiler/codegen (why 16:
# docs/compiler.md). Its headers and the one shared libLLVM-16.so, found by
# path rather than LLVMConfig.cmake, which would offer the static component
# archives; only dtl_codegen and what links it see them.
find_path(DTL_LLVM16_INCLUDE llvm/IR/IRBuilder.h PATHS /usr/lib/llvm-16/include NO_DEFAULT_PATH)
find_library(DTL_LLVM16_LIB NAMES LLVM-16 PATHS /usr/lib/llvm-16/lib NO_DEFAULT_PATH)
set(DTL_HAVE_LLVM16 OFF)
if(DTL_LLVM16_INCLUDE AND DTL_LLVM16_LIB)
  set(DTL_HAVE_LLVM16 ON)
  add_library(dtl_llvm16 INTERFACE)
  target_include_directories(dtl_llvm16 SYSTEM INTERFACE ${DTL_LLVM16_INCLUDE})
  target_compile_definitions(dtl_llvm16 INTERFACE _GNU_SOURCE __STDC_CONSTANT_MACROS __STDC_FORMAT_MACROS
                                                  __STDC_LIMIT_MACROS)
  target_link_libraries(dtl_llvm16 INTERFACE ${DTL_LLVM16_LIB})
endif()
# The NVPTX target's test assembles PTX with the toolkit's ptxas when present.
find_program(DTL_PTXAS ptxas PATHS /usr/local/cuda/bin)
