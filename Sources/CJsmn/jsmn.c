/* The one copy of jsmn's definitions (jsmn.h without JSMN_HEADER defines them), with the options
 * cjsmn.h sets for both sides (strict mode, parent links). What jsmn still lets through (trailing
 * commas, several top-level values, number and literal spelling, control characters and UTF-8 in
 * strings) is refused by JSONText.swift. */
#define PORTAL_CJSMN_DEFINITIONS
#include "include/cjsmn.h"
