# One warning set for every target of ours.
add_library(slabkit_warnings INTERFACE)
target_compile_options(slabkit_warnings INTERFACE -Wall -Wextra -Wshadow -Wcast-align -Wunused
                       $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Woverloaded-virtual>)
if(SLABKIT_WERROR)
  target_compile_options(slabkit_warnings INTERFACE -Werror)
endif()
