# tests/cli: `modattn serve` options seen from outside (tests/server is the server's own suite)
if(TARGET modattn_cli AND TARGET modattn_server)
  # --host 127.0.0.2 and ::1 answer there only; a host that is no address is refused
  add_test(NAME serve_host COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/serve_host.sh $<TARGET_FILE:modattn_cli>
           ${CMAKE_SOURCE_DIR}/.models/all-MiniLM-L6-v2 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(serve_host PROPERTIES TIMEOUT 300)
endif()

# ctest labels (docs/ARCHITECTURE.md; modattn_test adds unit)
modattn_label("cli;server" serve_host)
