#include "hp/version.h"

#define HP_STR_(x) #x
#define HP_STR(x) HP_STR_(x)

HP_EXTERN(uint32_t) hp_version(void)
{
    return HP_VERSION_NUMBER;
}

HP_EXTERN(const char *) hp_version_string(void)
{
    return HP_STR(HP_VERSION_MAJOR) "." HP_STR(HP_VERSION_MINOR) "." HP_STR(HP_VERSION_PATCH);
}
