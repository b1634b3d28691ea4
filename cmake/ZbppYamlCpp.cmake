# yaml-cpp, for job specs (client/) and zbpp-sched's cost files
# (scheduler/cli/): sets ZBPP_YAML_CPP to its target. Included by the
# top-level project and by the fuzz build (tests/fuzz), which configures
# client/ on its own.
find_package(yaml-cpp CONFIG REQUIRED)
# Debian 12's yaml-cpp 0.7 exports `yaml-cpp`; newer releases also
# `yaml-cpp::yaml-cpp`.
if(TARGET yaml-cpp::yaml-cpp)
  set(ZBPP_YAML_CPP yaml-cpp::yaml-cpp)
else()
  set(ZBPP_YAML_CPP yaml-cpp)
endif()
