# Man pages for the programs and their subcommands, made at build time by help2man from each
# program's --help and --version, gzip'd for /usr/share/man. Included from deploy/packaging.cmake.
#
# help2man has to run the programs, so the pages are made only where they can run:
#   - a native build runs the programs it built;
#   - a cross build runs them under CMAKE_CROSSCOMPILING_EMULATOR (qemu-user, which
#     deploy/cross/aarch64-linux-gnu.cmake sets when qemu is installed);
#   - or, with -DTERN_MAN_HOST_BIN=DIR, runs DIR's programs instead: a native build of the same
#     source, whose --help text is the same on every architecture.
# Otherwise (no help2man, or a cross build with neither) the build and the package have no pages.
# Sanitizer builds are never packaged: their programs need not run at build time.
if(NOT TARGET tern-coordinator OR NOT TARGET tern-worker OR NOT TARGET tern-sim
   OR TERN_SANITIZE OR TERN_TSAN)
  return()
endif()
set(TERN_MAN_HOST_BIN "" CACHE PATH
    "Directory of natively built tern programs that help2man runs in a cross build")
find_program(TERN_HELP2MAN help2man)
if(NOT TERN_HELP2MAN)
  message(STATUS "help2man not found: no man pages (deploy/install-deps.sh installs it)")
  return()
endif()
if(CMAKE_CROSSCOMPILING AND NOT TERN_MAN_HOST_BIN AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
  message(STATUS "Cross build without an emulator nor TERN_MAN_HOST_BIN: no man pages")
  return()
endif()

set(man_src ${CMAKE_CURRENT_LIST_DIR}/man)
set(man_dir ${PROJECT_BINARY_DIR}/man)
# The sections every page shares (copyright, where to report bugs).
configure_file(${man_src}/common.h2m.in ${man_dir}/common.h2m @ONLY)

# tern_run_shim(PAGE PROGRAM SUBCOMMAND OUT): OUT is a script that runs PROGRAM (as this build
# can run it) with SUBCOMMAND, if any, before the arguments it is given: what help2man executes.
function(tern_run_shim page program subcommand out)
  if(TERN_MAN_HOST_BIN)
    set(run "'${TERN_MAN_HOST_BIN}/${program}'")
  else()
    set(run "'$<TARGET_FILE:${program}>'")
    if(CMAKE_CROSSCOMPILING)
      list(JOIN CMAKE_CROSSCOMPILING_EMULATOR "' '" emulator)
      set(run "'${emulator}' ${run}")
    endif()
  endif()
  set(shim ${man_dir}/run/${page})
  file(GENERATE OUTPUT ${shim} CONTENT "#!/bin/sh\nexec ${run} ${subcommand} \"$@\"\n"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                        WORLD_READ WORLD_EXECUTE)
  set(${out} ${shim} PARENT_SCOPE)
endfunction()

# tern_man_page(PROGRAM SUBCOMMAND SECTION PROSE): the page PROGRAM[-SUBCOMMAND].SECTION.gz, with
# the prose of deploy/packaging/man/PROSE (its NAME line and the sections --help lacks).
set(TERN_MAN_PAGES "")
function(tern_man_page program subcommand section prose)
  set(page ${program})
  set(version_args "")
  if(subcommand)
    set(page ${program}-${subcommand})
    # A subcommand has no --version of its own: the page is named for it with the program's.
    set(version_args "--version-string=${page} ${PROJECT_VERSION}")
  endif()
  tern_run_shim(${page} ${program} "${subcommand}" shim)
  set(out ${man_dir}/${page}.${section})
  set(program_dep ${program})
  if(TERN_MAN_HOST_BIN)
    set(program_dep "")
  endif()
  add_custom_command(
    OUTPUT ${out}.gz
    COMMAND ${TERN_HELP2MAN} --no-info --section=${section} --include=${man_src}/${prose}
            --include=${man_dir}/common.h2m ${version_args} --output=${out} ${shim}
    COMMAND gzip -9nf ${out}
    DEPENDS ${program_dep} ${man_src}/${prose} ${man_dir}/common.h2m
    COMMENT "help2man: ${page}(${section})"
    VERBATIM)
  install(FILES ${out}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT daemons)
  set(TERN_MAN_PAGES ${TERN_MAN_PAGES} ${out}.gz PARENT_SCOPE)
endfunction()

tern_man_page(tern-coordinator "" 8 tern-coordinator.h2m)
tern_man_page(tern-coordinator status 8 tern-coordinator-status.h2m)
tern_man_page(tern-coordinator allocate 8 tern-coordinator-allocate.h2m)
tern_man_page(tern-coordinator keygen 8 keygen.h2m)
tern_man_page(tern-worker "" 8 tern-worker.h2m)
tern_man_page(tern-worker keygen 8 keygen.h2m)
tern_man_page(tern-sim "" 1 tern-sim.h2m)
add_custom_target(tern-man-pages ALL DEPENDS ${TERN_MAN_PAGES})
