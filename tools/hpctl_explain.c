#include "hpctl.h"
int hpctl_explain(int argc, char **argv) { (void)argc; (void)argv; return HPCTL_USAGE; }
