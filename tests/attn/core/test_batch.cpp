// batch.hpp: a batch [B, n, d] is one row-major buffer whose shape cannot change under it, and
// whose size never overflows.
#include "attn/core/batch.hpp"
#include "attn/ops/masks.hpp"

#include "expect.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace test_batch {

using attn_test::message_of;

using attn::AllowedBatch;
using attn::Batch;
using attn::Index;
using attn::Matrix;

// ---- A batch keeps its shape --------------------------------------------------------------------

// Whether the storage behind data() could be resized through it: only an owning Eigen matrix
// (a PlainObjectBase) can; a Map's resize() is Eigen's assertion that the size is unchanged.
template <typename T>
concept ResizableThroughData = requires(T& t) {
  t.data().conservativeResize(1, 4);
};

TEST(Batch, DataIsAFixedShapeView) {
  // `X.data().resize(1, 4)` used to shrink the storage under X[b] while batch() and rows()
  // still described the old shape: the next attention read past the end of the buffer.
  using Data = decltype(std::declval<Batch&>().data());
  static_assert(std::is_same_v<Data, Eigen::Map<Batch::Storage>>);
  static_assert(!std::is_convertible_v<Data, Batch::Storage&>);
  static_assert(!std::is_base_of_v<Eigen::PlainObjectBase<Batch::Storage>, Data>);
  static_assert(!ResizableThroughData<Batch>);
  static_assert(!ResizableThroughData<AllowedBatch>);
  // Values are written through it as before; the shape stays what the constructor made.
  Batch X(2, 3, 4);  // [2, 3, 4]
  X.data() = Matrix::Constant(6, 4, 1.5f);
  X.data().row(5).setConstant(-2.0f);
  ASSERT_EQ(X.shape(), (std::vector<std::size_t>{2, 3, 4}));
  ASSERT_EQ(X.data().rows(), 6);
  EXPECT_EQ(X[0](2, 3), 1.5f);
  EXPECT_EQ(X[1](2, 0), -2.0f);
}

TEST(Batch, ShapesThatOverflowAreRejected) {
  // B * rows overflowed Index (signed: undefined behaviour, UBSan's report) and then asked
  // Eigen for a wrapped-around size.
  const Index big = (Index{1} << 62) - 1;
  EXPECT_EQ(message_of([&] { static_cast<void>(Batch(big, 4, 1)); }),
            "BatchOf: the shape [4611686018427387903, 4, 1] has more elements than an Index can "
            "count (B * rows * cols overflows)");
  // B * rows = 2^62 fits; times cols = 4 does not.
  EXPECT_THROW(static_cast<void>(Batch(Index{1} << 31, Index{1} << 31, 4)), std::invalid_argument);
  EXPECT_THROW(static_cast<void>(AllowedBatch(4, big, 2)), std::invalid_argument);
  EXPECT_EQ(message_of([] { static_cast<void>(Batch(-1, 2, 3)); }),
            "BatchOf: negative shape [-1, 2, 3]");
  // Empty dimensions are fine, whatever the others.
  EXPECT_EQ(Batch(0, big, big).data().size(), 0);
  EXPECT_EQ(Batch(big, 0, 3).data().size(), 0);
}

TEST(Batch, ShapesTheMachineCannotHoldAreRefusedBeforeAllocating) {
  // 2^60 floats fit in Index but not in any machine: std::bad_alloc before, named now.
  const Index n = Index{1} << 20;
  const std::string m = message_of([&] { static_cast<void>(Batch(n, n, n)); });
  EXPECT_EQ(m.rfind("BatchOf: the shape [1048576, 1048576, 1048576] needs 4.0 EiB for the batch; "
                    "this machine has ",
                    0),
            0u)
      << m;
}

}  // namespace test_batch
