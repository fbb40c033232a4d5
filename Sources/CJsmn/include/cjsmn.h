/* jsmn (Debian libjsmn-dev 1.1.0), the JSON tokenizer of the library (issue 27): declarations
 * only; jsmn.c compiles its definitions once, in strict mode. It allocates nothing and returns
 * offsets into the caller's buffer, so a secret is decoded straight from our wiped input. */
#ifndef PORTAL_CJSMN_H
#define PORTAL_CJSMN_H
#define JSMN_HEADER
#define JSMN_STRICT
#include <jsmn.h>
#endif
