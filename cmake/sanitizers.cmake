# SLABKIT_SANITIZE applies to everything built in this tree (library, tests, benchmarks).
if(SLABKIT_SANITIZE)
  add_compile_options(-fsanitize=${SLABKIT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${SLABKIT_SANITIZE})
  add_compile_definitions(SLABKIT_SANITIZED=1)
endif()
