#include "hp/errors.h"
#include "error.h"
#include "options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local int32_t last_code;
static _Thread_local char last_detail[512];

HP_EXTERN(const char *) hp_strerror(int32_t code)
{
    switch (code) {
#define HP_ERROR_TEXT_(name, value, text) \
    case value:                            \
        return text;
        HP_ERROR_TABLE(HP_ERROR_TEXT_)
#undef HP_ERROR_TEXT_
    }
    return "unknown error";
}

HP_EXTERN(const char *) hp_error_name(int32_t code)
{
    switch (code) {
#define HP_ERROR_NAME_(name, value, text) \
    case value:                            \
        return #name;
        HP_ERROR_TABLE(HP_ERROR_NAME_)
#undef HP_ERROR_NAME_
    }
    return "HP_UNKNOWN";
}

HP_EXTERN(const char *) hp_last_error_detail(void)
{
    return last_detail;
}

HP_EXTERN(int32_t) hp_last_error(void)
{
    return last_code;
}

int32_t hp_fail(int32_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_detail, sizeof(last_detail), fmt, ap);
    va_end(ap);
    last_code = code;
    hp_log("error %s: %s", hp_error_name(code), last_detail);
    return code;
}

void hp_set_detail(const char *msg)
{
    snprintf(last_detail, sizeof(last_detail), "%s", msg ? msg : "");
}

void hp_clear_error(void)
{
    last_code = HP_OK;
    last_detail[0] = '\0';
}

void hp_log(const char *fmt, ...)
{
    if (!hp_options()->debug)
        return;
    char line[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* Lines carry text from plugins and file names: no control byte (ESC,
     * CR, LF, BEL) of theirs reaches the terminal or forges a line. */
    hp_printable(line, sizeof(line), line);
    fprintf(stderr, "libhp: %s\n", line);
}

void hp_printable(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++)
        dst[i] = (unsigned char)src[i] >= 0x20 && (unsigned char)src[i] < 0x7f ? src[i] : '?';
    if (cap)
        dst[i] = '\0';
}
