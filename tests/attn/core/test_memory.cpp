// memory.hpp: whether two tensors share memory (exactly, strides included), the checked element
// counts, and the refusal of a size the machine cannot hold, before anything is allocated.
#include "attn/core/memory.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace test_memory {

using attn::ElementCount;
using attn::Index;
using attn::Matrix;
using attn::MatrixD;
using attn::memory_of;
using attn::MemoryRange;
using attn::overlap;
using attn_test::message_of;

constexpr Index kMax = std::numeric_limits<Index>::max();

// ---- Overlap, exactly -----------------------------------------------------------------------

TEST(MemoryOverlap, AMatrixOverlapsItselfAndAnyPartOfIt) {
  Matrix m(6, 8);  // [6 x 8]
  EXPECT_TRUE(overlap(memory_of(m), memory_of(m)));
  EXPECT_TRUE(overlap(memory_of(m), memory_of(m.row(3))));
  EXPECT_TRUE(overlap(memory_of(m.block(1, 2, 3, 3)), memory_of(m.block(3, 4, 2, 2))));  // (3, 4)
  EXPECT_TRUE(overlap(memory_of(m.col(5)), memory_of(m.row(2))));                        // (2, 5)
  const Eigen::Ref<const Matrix> view = m.middleRows(2, 2);
  EXPECT_TRUE(overlap(memory_of(view), memory_of(m.bottomRows(5))));
}

TEST(MemoryOverlap, BlocksSideBySideShareNothingThoughTheirSpansInterleave) {
  // Two heads' column blocks of one [n x 8] matrix: every row of one lies between two rows of
  // the other, so the spans overlap, but no element is shared; multi-head attention writes
  // them so, and they must not be refused.
  Matrix m(6, 8);  // [6 x 8]
  const MemoryRange left = memory_of(m.leftCols(4)), right = memory_of(m.rightCols(4));
  EXPECT_LT(right.data, left.end());  // the spans do interleave
  EXPECT_FALSE(overlap(left, right));
  EXPECT_FALSE(overlap(right, left));
  EXPECT_FALSE(overlap(memory_of(m.col(0)), memory_of(m.col(1))));  // strided columns
  EXPECT_FALSE(overlap(memory_of(m.col(3)), memory_of(m.rightCols(4))));
  EXPECT_TRUE(overlap(memory_of(m.col(4)), memory_of(m.rightCols(4))));
  EXPECT_FALSE(overlap(memory_of(m.block(0, 0, 3, 8)), memory_of(m.block(3, 0, 3, 8))));
  // A block whose rows wrap onto the next row of the other, in the frame of the first.
  EXPECT_FALSE(overlap(memory_of(m.block(1, 6, 2, 2)), memory_of(m.block(2, 0, 1, 6))));
  EXPECT_TRUE(overlap(memory_of(m.block(1, 6, 2, 2)), memory_of(m.block(2, 0, 1, 7))));  // (2, 6)
  // One row of the matrix against a block: a single row takes the block's stride.
  EXPECT_FALSE(overlap(memory_of(m.row(1).head(4)), memory_of(m.block(0, 4, 6, 4))));
  EXPECT_TRUE(overlap(memory_of(m.row(1).tail(5)), memory_of(m.block(0, 4, 6, 4))));
}

TEST(MemoryOverlap, SeparateMatricesAndEmptyOnesNeverOverlap) {
  Matrix a(3, 3), b(3, 3), empty;
  EXPECT_FALSE(overlap(memory_of(a), memory_of(b)));
  EXPECT_FALSE(overlap(memory_of(a), memory_of(empty)));
  EXPECT_FALSE(overlap(memory_of(empty), memory_of(empty)));
  EXPECT_FALSE(overlap(memory_of(a.leftCols(0)), memory_of(a)));  // no element, no memory
}

TEST(MemoryOverlap, ViewsOfOneBufferAsOtherTypesAreComparedByTheirSpans) {
  // The same bytes seen as floats and as doubles: not comparable element by element, so the
  // spans decide, refusing rather than guessing.
  MatrixD d(2, 2);
  const Eigen::Map<Matrix> as_float(reinterpret_cast<float*>(d.data()), 2, 4);
  EXPECT_TRUE(overlap(memory_of(as_float.col(3)), memory_of(d.col(0))));
  EXPECT_FALSE(overlap(memory_of(as_float.bottomRows(1)), memory_of(d.topRows(1))));
}

TEST(MemoryOverlap, FirstOverlapFindsThePairInTheOrderOfTheFirstList) {
  std::vector<Matrix> model(5, Matrix(4, 4)), grads(5, Matrix(4, 4));
  std::vector<MemoryRange> m, g;
  for (const Matrix& t : model) m.push_back(memory_of(t));
  for (const Matrix& t : grads) g.push_back(memory_of(t));
  EXPECT_FALSE(attn::first_overlap(g, m));
  g[3] = memory_of(model[1].row(2));  // gradient 3 inside parameter 1
  g[4] = memory_of(model[0]);
  const auto hit = attn::first_overlap(g, m);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, (std::pair<std::size_t, std::size_t>{3, 1}));
  EXPECT_FALSE(attn::first_overlap(std::vector<MemoryRange>{}, m));
}

TEST(MemoryApart, OutputsOverlappingEachOtherOrAnInputAreNamed) {
  Matrix a(4, 4), b(4, 4), c(4, 4);
  EXPECT_EQ(message_of([&] {
              attn::require_apart("f", {{"dQ", memory_of(a)}, {"dK", memory_of(a.col(1))}});
            }),
            "f: dQ and dK share memory: each output needs memory of its own (one would overwrite "
            "the other); pass separate results");
  EXPECT_EQ(message_of([&] {
              attn::require_apart("g", {{"out", memory_of(a)}, {"lse", memory_of(b.col(0))}},
                                  {{"Q", memory_of(c)}, {"V", memory_of(b)}});
            }),
            "g: lse shares memory with V: an output must not alias an input (it would be "
            "overwritten or reallocated while still being read); pass a separate result");
  // Separate memory, and inputs that alias each other (self-attention): nothing to refuse.
  EXPECT_EQ(message_of([&] {
              attn::require_apart("h", {{"out", memory_of(a)}, {"lse", memory_of(b.col(0))}},
                                  {{"Q", memory_of(c)}, {"K", memory_of(c)}});
            }),
            "(no exception)");
}

// ---- Sizes ----------------------------------------------------------------------------------

TEST(MemorySizes, CountsAreCheckedAtEveryStep) {
  EXPECT_EQ(ElementCount(3, 4).add(1, 5, 2).value(), 22);
  EXPECT_FALSE(ElementCount(kMax, 1).overflowed());
  EXPECT_TRUE(ElementCount(kMax, 2).overflowed());  // the product
  EXPECT_TRUE(ElementCount(Index{1} << 32, Index{1} << 32).overflowed());
  EXPECT_TRUE(ElementCount(Index{1} << 31, Index{1} << 31, 4).overflowed());  // the copies
  EXPECT_TRUE(ElementCount(kMax, 1).add(1, 1).overflowed());                  // the sum
  EXPECT_TRUE(ElementCount(-1, 4).overflowed());                              // not a size
  const ElementCount layer(Index{1} << 31, Index{1} << 30);                   // 2^61, fits
  EXPECT_FALSE(layer.overflowed());
  EXPECT_TRUE(ElementCount(layer, 4).overflowed());  // 2^63 does not
  // Once overflowed, it stays so, and the estimate still says how much was asked.
  ElementCount c(kMax, 2);
  c.add(1, 1);
  EXPECT_TRUE(c.overflowed());
  EXPECT_DOUBLE_EQ(c.estimate(), 2.0 * static_cast<double>(kMax) + 1.0);
}

TEST(MemorySizes, BytesAreWrittenInBinaryUnits) {
  EXPECT_EQ(attn::bytes_str(512), "512 B");
  EXPECT_EQ(attn::bytes_str(1536), "1.5 KiB");
  EXPECT_EQ(attn::bytes_str(23.4 * 1024 * 1024 * 1024), "23.4 GiB");
  EXPECT_EQ(attn::bytes_str(4.0 * 1024 * 1024 * 1024 * 1024 * 1024), "4.0 PiB");
  EXPECT_EQ(attn::bytes_str(0x1p80), "1.05e+06 EiB");
}

TEST(MemorySizes, TheMachineHasSomePhysicalMemory) {
  const std::uint64_t bytes = attn::physical_memory();
  EXPECT_GE(bytes, std::uint64_t{64} << 20);  // more than 64 MiB: it read something
  EXPECT_EQ(attn::physical_memory(), bytes);  // read once
}

TEST(MemorySizes, WhatTheMachineCannotHoldIsRefusedNamingTheSizes) {
  const std::string machine =
      "; this machine has " + attn::bytes_str(static_cast<double>(attn::physical_memory()));
  const auto refuse = [](const ElementCount& count, std::size_t scalar) {
    return message_of([&] {
      attn::require_fits_in_memory("f", count, scalar, "of parameters",
                                   [] { return std::string("d_model 1099511627776"); });
    });
  };
  // 2^50 floats: 4 PiB, more than any machine this runs on.
  EXPECT_EQ(refuse(ElementCount(Index{1} << 25, Index{1} << 25), 4),
            "f: d_model 1099511627776 needs 4.0 PiB of parameters" + machine);
  EXPECT_EQ(refuse(ElementCount(Index{1} << 40, Index{1} << 40), 4),
            "f: d_model 1099511627776 needs 4.19e+06 EiB of parameters (more elements than an "
            "Index can count)" +
                machine);
  // 2^61 elements fit in Index, not in bytes once times 8: refused, with no overflow.
  EXPECT_NE(refuse(ElementCount(Index{1} << 61, 1), 8).find("needs 16.0 EiB"), std::string::npos);
  EXPECT_EQ(refuse(ElementCount(1024, 1024), 4), "(no exception)");  // 4 MiB
  EXPECT_EQ(refuse(ElementCount(0, 7), 4), "(no exception)");
}

}  // namespace test_memory
