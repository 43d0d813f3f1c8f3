// The data plane's frames live in the protocol (hmpmd/protocol/data_frames.h)
// since drivers fetch outputs too; these names keep the worker's code as is.
#pragma once

#include "hmpmd/protocol/data_frames.h"

namespace hmpmd::worker {

using hmpmd::DataHeader;
using hmpmd::DataOp;
using hmpmd::DecodeMeta;
using hmpmd::EncodeMeta;
using hmpmd::kFetchChunkBytes;
using hmpmd::ParseDataHeader;

}  // namespace hmpmd::worker
