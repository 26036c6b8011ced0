/* forge_error: the input is a JSON string; fails with its contents as the error message,
 * so a caller chooses every byte of a guest_error's message (line breaks included), as a
 * hostile tool would. It is unquote.c (the same unescaping) answering GB_ERR. */
#define UNQUOTE_ANSWER GB_ERR
#include "unquote.c"
