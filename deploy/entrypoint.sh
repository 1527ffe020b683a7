#!/bin/sh
# The image's entry point (deploy/Dockerfile): one image, three roles and every dpipe command.
#
#   scheduler [ARGS]   dask scheduler ARGS          (ports 8786 comm, 8787 dashboard)
#   worker [ARGS]      dask worker ARGS             (scheduler: ARGS or $DASK_SCHEDULER_ADDRESS)
#   train ARGS         dpipe train ARGS             (a cluster: --scheduler or $DPIPE_SCHEDULER)
#   dpipe ARGS         dpipe ARGS                   (retrain, ingest, evaluate, registry, ...)
#   anything else      run as given                 (sh, python, ...)
#   no argument        dpipe --help
set -eu

if [ $# -eq 0 ]; then
  set -- dpipe --help
fi
role=$1
case $role in
  scheduler | worker)
    shift
    exec dask "$role" "$@"
    ;;
  train | retrain | ingest | evaluate | predict | make-data | info | verify | split | registry)
    exec dpipe "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
