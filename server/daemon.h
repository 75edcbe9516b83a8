/* fedkern-server's main: config file + flags, store, engine, gRPC service, signals. */
#ifndef FK_SERVER_DAEMON_H
#define FK_SERVER_DAEMON_H

int fk_server_main(int argc, char **argv);

#endif
