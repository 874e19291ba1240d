/* cli/mpi_internal.h — what cli/cmd_mpi.c and cli/cmd_mpi_search.c share (cli/cli_mpi.c). */
#ifndef MODATTN_CLI_MPI_INTERNAL_H
#define MODATTN_CLI_MPI_INTERNAL_H

#include "cli/cli.h"

/* Says that this build has no MPI and how to get it; returns 1. */
int cli_mpi_missing(const char *cmd);

#ifdef MODATTN_HAVE_MPI
/* argv without "--mpi" (before a "--") into out (room for argc + 1); the new argc. */
int cli_mpi_strip(int argc, char **argv, char **out);
/* MPI_Init (once) with this thread alone calling MPI; rank and size of MPI_COMM_WORLD. -1 (said)
 * on failure. */
int cli_mpi_init(const char *cmd, int *rank, int *size);

/* A distributed command's start: av/ac the arguments without --mpi; rank and size. */
typedef struct cli_mpi_run {
    char **av;
    int ac, rank, size;
    int rc; /* when cli_mpi_begin returned 1: the exit status */
} cli_mpi_run;
/* `CMD --mpi`: with --help, or on one process (mpirun -np 1, or no mpirun), the plain command
 * runs (the same options reader, the same output) and 1 is returned with its status in m->rc, as
 * after a failure to start MPI (said). 0: MPI runs on m->size > 1 processes; end with
 * cli_mpi_end (MPI_Finalize, m->av freed). */
int cli_mpi_begin(cli_globals *g, const char *cmd, cli_cmd_fn plain, int argc, char **argv, cli_mpi_run *m);
void cli_mpi_end(cli_mpi_run *m);
#endif

#endif
