// page_list.hpp - an intrusive doubly linked list of page descriptors with a count, through
// page::next/prev: buddy free lists, per-slot page lists, slab lists.
#pragma once

#include "base/intrusive_list.hpp"
#include "page/page.hpp"

namespace slabkit {

using page_list = intrusive_list<page>;

} // namespace slabkit
