// vkattn: attention kernels for Vulkan. Include this for the whole API.
#pragma once
#include <vkattn/bench_kernels.hpp>
#include <vkattn/block_allocator.hpp>
#include <vkattn/block_sparse.hpp>
#include <vkattn/block_sparse_variant.hpp>
#include <vkattn/buffer.hpp>
#include <vkattn/capabilities.hpp>
#include <vkattn/capability_report.hpp>
#include <vkattn/context.hpp>
#include <vkattn/dtype.hpp>
#include <vkattn/error.hpp>
#include <vkattn/kv_cache.hpp>
#include <vkattn/ops.hpp>
#include <vkattn/paged_attention.hpp>
#include <vkattn/prefix_prefill.hpp>
#include <vkattn/tensor.hpp>
#include <vkattn/version.hpp>
