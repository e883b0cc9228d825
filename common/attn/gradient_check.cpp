// placeholder: being written
#include "attn/matrix.hpp"
