/* fedkern-server: the aggregation daemon (server/daemon.c). */
#include "server/daemon.h"

int main(int argc, char **argv)
{
    return fk_server_main(argc, argv);
}
