/* cli/cli_mpi.c — what `index --mpi` (cli/cmd_mpi.c) and `search --mpi` (cli/cmd_mpi_search.c)
 * share: starting MPI, falling back to the plain command (--help, one process), and the message of
 * a build without MPI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mpi_internal.h"

int cli_mpi_missing(const char *cmd) {
    fprintf(stderr,
            "modattn: %s --mpi: this modattn was built without MPI.\n"
            "  Install it (Debian/Ubuntu: apt-get install libopenmpi-dev openmpi-bin), rebuild (make build,\n"
            "  or cmake again: MPI is found by itself; -DMODATTN_MPI=ON makes it required), then run e.g.\n"
            "  mpirun -np 2 modattn %s --mpi ...\n"
            "  Without --mpi, `modattn %s` works as it is.\n",
            cmd, cmd, cmd);
    return 1;
}

#ifdef MODATTN_HAVE_MPI
#include <mpi.h>

int cli_mpi_strip(int argc, char **argv, char **out) {
    int n = 0;
    bool dd = false;
    for (int i = 0; i < argc; i++) {
        if (!dd && strcmp(argv[i], "--") == 0) dd = true;
        if (!dd && i > 0 && strcmp(argv[i], "--mpi") == 0) continue;
        out[n++] = argv[i];
    }
    out[n] = NULL;
    return n;
}

int cli_mpi_init(const char *cmd, int *rank, int *size) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        /* only this thread calls MPI; the thread pool's workers never do */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "modattn: %s --mpi: MPI_Init failed (run it as mpirun -np N modattn %s --mpi ...)\n", cmd,
                    cmd);
            return -1;
        }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

int cli_mpi_begin(cli_globals *g, const char *cmd, cli_cmd_fn plain, int argc, char **argv, cli_mpi_run *m) {
    memset(m, 0, sizeof *m);
    if (!(m->av = calloc((size_t)argc + 1, sizeof *m->av))) {
        m->rc = 1;
        return 1;
    }
    m->ac = cli_mpi_strip(argc, argv, m->av);
    m->size = 1;
    if (cli_has_arg(m->ac, m->av, "-h") || cli_has_arg(m->ac, m->av, "--help")) { /* no MPI needed */
        m->rc = plain(g, m->ac, m->av);
        free(m->av);
        return 1;
    }
    if (cli_mpi_init(cmd, &m->rank, &m->size) != 0) {
        free(m->av);
        m->rc = 1;
        return 1;
    }
    if (m->size == 1) { /* one process (mpirun -np 1, or no mpirun): the plain run */
        m->rc = plain(g, m->ac, m->av);
        MPI_Finalize();
        free(m->av);
        return 1;
    }
    return 0;
}

void cli_mpi_end(cli_mpi_run *m) {
    MPI_Finalize();
    free(m->av);
    m->av = NULL;
}
#endif
