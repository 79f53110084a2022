/* hali — the command-line tool's internal interfaces. */
#ifndef HALI_TOOLS_TOOLS_H
#define HALI_TOOLS_TOOLS_H

int hali_tool_run(int argc, char **argv);

#endif /* HALI_TOOLS_TOOLS_H */
