/* cli/mpi_internal.h — what cli/cmd_mpi.c and cli/cmd_mpi_search.c share. */
#ifndef MODATTN_CLI_MPI_INTERNAL_H
#define MODATTN_CLI_MPI_INTERNAL_H

/* Says that this build has no MPI and how to get it; returns 1. */
int cli_mpi_missing(const char *cmd);

#ifdef MODATTN_HAVE_MPI
/* argv without "--mpi" (before a "--") into out (room for argc + 1); the new argc. */
int cli_mpi_strip(int argc, char **argv, char **out);
/* MPI_Init (once) with this thread alone calling MPI; rank and size of MPI_COMM_WORLD. -1 (said)
 * on failure. */
int cli_mpi_init(const char *cmd, int *rank, int *size);
#endif

#endif
