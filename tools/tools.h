/* hali — the command-line tool's internal interfaces. */
#ifndef HALI_TOOLS_TOOLS_H
#define HALI_TOOLS_TOOLS_H

#include "hali/hali.h"

int tool_run(int argc, char **argv);
/* Prints |s| (consumed) as "hali: error: ..." on stderr; returns 1. */
int tool_report(hali_status_t s);

#endif /* HALI_TOOLS_TOOLS_H */
