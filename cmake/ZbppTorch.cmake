# LibTorch from PyTorch 2.11.0's wheel (CUDA 13.0 build, C++11 ABI), as two
# imported targets of our own:
#
#   zbpp::torch_cpu   c10 + torch_cpu, with c10d's Gloo backend; every worker
#                     library and CPU-only test binary links this alone.
#   zbpp::torch_cuda  adds c10_cuda + torch_cuda (the CUDA kernels and c10d's
#                     NCCL backend); only the binaries that may run on a GPU.
#
# Why not the wheel's share/cmake/Torch/TorchConfig.cmake: it links
# libtorch_cuda into every target (--no-as-needed), so each test binary would
# load ~1 GB of CUDA libraries at start; it re-runs CUDA detection at every
# configure; and it puts torch/include first on the include path, where the
# wheel's own protobuf 3.13 headers (torch/include/google) would shadow
# Debian's protobuf 3.21, which our generated *.pb.h need. Here torch/include
# is reached through a directory of symbolic links that leaves out google/;
# the wheel's fmt and other third-party headers have no Debian counterpart
# that zbpp includes, so they stay.
#
# The wheel is installed by scripts/install-deps.sh (requirements/libtorch.txt)
# into the project's virtual environment, ${ZBPP_HOME:-~/.cache/zbpp}/venv;
# -DZBPP_TORCH_ROOT=…/site-packages/torch points elsewhere.

set(ZBPP_TORCH_VERSION 2.11.0)
set(ZBPP_TORCH_ROOT "" CACHE PATH
    "The torch package directory of PyTorch ${ZBPP_TORCH_VERSION}'s wheel (…/site-packages/torch)")

if(NOT ZBPP_TORCH_ROOT)
  if(DEFINED ENV{ZBPP_HOME})
    set(_zbpp_home "$ENV{ZBPP_HOME}")
  else()
    set(_zbpp_home "$ENV{HOME}/.cache/zbpp")
  endif()
  file(GLOB _zbpp_torch_candidates
       "${_zbpp_home}/venv/lib/python3*/site-packages/torch/version.py")
  if(_zbpp_torch_candidates)
    list(GET _zbpp_torch_candidates 0 _zbpp_torch_version_py)
    get_filename_component(_zbpp_torch_root "${_zbpp_torch_version_py}" DIRECTORY)
    set(ZBPP_TORCH_ROOT "${_zbpp_torch_root}" CACHE PATH
        "The torch package directory of PyTorch ${ZBPP_TORCH_VERSION}'s wheel (…/site-packages/torch)"
        FORCE)
  endif()
endif()

# The version is read from the wheel's version.py (importing torch would cost
# seconds at every configure).
if(NOT EXISTS "${ZBPP_TORCH_ROOT}/version.py")
  message(FATAL_ERROR "LibTorch: no PyTorch ${ZBPP_TORCH_VERSION} wheel found "
          "(ZBPP_TORCH_ROOT='${ZBPP_TORCH_ROOT}'); run scripts/install-deps.sh")
endif()
file(STRINGS "${ZBPP_TORCH_ROOT}/version.py" _zbpp_torch_version_line
     REGEX "^__version__ = ")
if(NOT _zbpp_torch_version_line MATCHES "'${ZBPP_TORCH_VERSION}(\\+[a-z0-9]+)?'")
  message(FATAL_ERROR "LibTorch: ${ZBPP_TORCH_ROOT} holds ${_zbpp_torch_version_line}, "
          "zbpp needs ${ZBPP_TORCH_VERSION}; run scripts/install-deps.sh")
endif()

set(_zbpp_torch_include "${CMAKE_BINARY_DIR}/torch-include")
file(GLOB _zbpp_torch_entries RELATIVE "${ZBPP_TORCH_ROOT}/include"
     "${ZBPP_TORCH_ROOT}/include/*")
list(REMOVE_ITEM _zbpp_torch_entries google)
file(MAKE_DIRECTORY "${_zbpp_torch_include}")
foreach(_entry IN LISTS _zbpp_torch_entries)
  file(CREATE_LINK "${ZBPP_TORCH_ROOT}/include/${_entry}"
       "${_zbpp_torch_include}/${_entry}" SYMBOLIC)
endforeach()

set(_zbpp_torch_lib "${ZBPP_TORCH_ROOT}/lib")
add_library(zbpp::torch_cpu INTERFACE IMPORTED)
set_target_properties(zbpp::torch_cpu PROPERTIES
  # Imported include directories are system ones: torch's warnings stay out.
  INTERFACE_INCLUDE_DIRECTORIES
    "${_zbpp_torch_include};${_zbpp_torch_include}/torch/csrc/api/include"
  # What the wheel's torch_cpu target defines: c10d's headers compile their
  # Gloo parts only under these.
  INTERFACE_COMPILE_DEFINITIONS "USE_DISTRIBUTED;USE_C10D_GLOO"
  INTERFACE_LINK_LIBRARIES
    "${_zbpp_torch_lib}/libtorch_cpu.so;${_zbpp_torch_lib}/libc10.so")

# torch_cuda registers the CUDA kernels from static initialisers and nothing
# of ours references it by symbol yet, hence --no-as-needed. Loading it needs
# no GPU or driver: libcuda is opened lazily.
#
# c10d's ProcessGroupNCCL.hpp includes the CUDA runtime's and NCCL's headers:
# from the CUDA toolkit (/usr/local/cuda on the build machines), else from
# the NVIDIA wheels next to torch (the Docker images). Only headers: the
# libraries come with libtorch_cuda.
file(GLOB _zbpp_nvidia_includes "${ZBPP_TORCH_ROOT}/../nvidia/*/include")
find_path(ZBPP_CUDA_RUNTIME_INCLUDE cuda_runtime_api.h
  HINTS /usr/local/cuda/include ${_zbpp_nvidia_includes})
find_path(ZBPP_NCCL_INCLUDE nccl.h HINTS /usr/local/cuda/include ${_zbpp_nvidia_includes})
# c10d's inline code calls the CUDA runtime (cudaStreamWaitEvent, ...).
file(GLOB _zbpp_nvidia_libs "${ZBPP_TORCH_ROOT}/../nvidia/*/lib")
find_library(ZBPP_CUDART NAMES libcudart.so.13 cudart
  HINTS /usr/local/cuda/lib64 ${_zbpp_nvidia_libs})
if(NOT ZBPP_CUDA_RUNTIME_INCLUDE OR NOT ZBPP_NCCL_INCLUDE OR NOT ZBPP_CUDART)
  message(FATAL_ERROR "LibTorch: the CUDA runtime's or NCCL's headers or the CUDA runtime "
          "library are missing (cuda_runtime_api.h: '${ZBPP_CUDA_RUNTIME_INCLUDE}', nccl.h: "
          "'${ZBPP_NCCL_INCLUDE}', libcudart: '${ZBPP_CUDART}'); install the CUDA toolkit at "
          "/usr/local/cuda or torch's NVIDIA wheels")
endif()
add_library(zbpp::torch_cuda INTERFACE IMPORTED)
set_target_properties(zbpp::torch_cuda PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${ZBPP_CUDA_RUNTIME_INCLUDE};${ZBPP_NCCL_INCLUDE}"
  INTERFACE_COMPILE_DEFINITIONS "USE_C10D_NCCL"
  INTERFACE_LINK_LIBRARIES
    "zbpp::torch_cpu;-Wl,--no-as-needed;${_zbpp_torch_lib}/libtorch_cuda.so;${_zbpp_torch_lib}/libc10_cuda.so;-Wl,--as-needed;${ZBPP_CUDART}")
message(STATUS "LibTorch ${ZBPP_TORCH_VERSION}: ${ZBPP_TORCH_ROOT}")
