// SPDX-License-Identifier: MIT
#include "pipeline/config.h"

void detect_config__defaults(struct detect_config *c)
{
	*c = (struct detect_config){
#define X(field, type, option, parsed, dflt) .field = (dflt),
		DETECT_THRESHOLDS(X)
#undef X
	};
}

void detect_config__merge(struct detect_config *c, const struct detect_config *recorded)
{
#define X(field, ...)                                                                              \
	if (!(c->given & DETECT_GIVEN(field)))                                                     \
		c->field = recorded->field;
	DETECT_THRESHOLDS(X)
#undef X
}
