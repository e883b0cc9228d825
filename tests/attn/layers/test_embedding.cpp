// embedding.hpp: the lookup (a copy, to the bit) and its backward, a scatter-add, against
// PyTorch's autograd and by hand, and its errors (backward_fixture.hpp says where each expected
// value comes from).
#include "attn/core/random.hpp"
#include "attn/layers/embedding.hpp"

#include "backward_fixture.hpp"
#include "expect.hpp"
#include "fixtures.hpp"

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

namespace test_embedding {

using attn_test::Comparison;
using attn_test::Fixture;
using attn_test::identical;
using attn_test::mat;
using attn_test::message_of;
using attn_test::names;

using attn::Matrix;

template <typename T>
class EmbeddingBackwardByHand : public ::testing::Test {};
TYPED_TEST_SUITE(EmbeddingBackwardByHand, attn_test::Reals);

TEST(EmbeddingBackward, MatchesTorch) {
  // Two sequences ids [2 x 5] through one table: the table's gradient is the scatter-add of
  // both sequences' dy, so embedding_backward is called once per sequence into one d_table.
  Comparison c("embedding");
  const Fixture& fx = c.fixture();
  const Matrix table = fx.matrix("weight");                       // [7 x 4]
  const course::NpyArray dy = fx.get("dy"), out = fx.get("out");  // [2, 5, 4]
  ASSERT_EQ(dy.shape.size(), 3u);
  Matrix d_table = Matrix::Zero(table.rows(), table.cols());
  for (std::size_t b = 0; b < dy.shape[0]; ++b) {
    const std::vector<int> ids = fx.ints("ids", b);
    // The lookup is a copy: equal to the bit.
    EXPECT_TRUE(identical(attn::embedding_forward(table, std::span<const int>(ids)), out.slice(b)));
    attn::embedding_backward(std::span<const int>(ids), dy.slice(b), d_table);
  }
  c.check("d_weight", d_table);
  // Id 6 never occurs: PyTorch's row is exactly 0, and so is ours (nothing was added to it).
  EXPECT_TRUE((d_table.row(6).array() == 0.0f).all());
  c.expect_every_gradient_compared();
}

TYPED_TEST(EmbeddingBackwardByHand, SumsRepeatedIdsAndLeavesUnusedRowsZero) {
  using T = TypeParam;
  // vocab 4, d_model 2, ids [2, 0, 2], dy = [[1, 2], [3, 4], [5, 6]]:
  //   row 2 gets dy rows 0 and 2: [1 + 5, 2 + 6] = [6, 8];  row 0 gets dy row 1: [3, 4]
  //   rows 1 and 3 occur nowhere: exactly 0.
  // A second call adds it all again (+=): [12, 16] and [6, 8]. Integers: exact.
  const std::vector<int> ids{2, 0, 2};
  const attn::MatrixOf<T> dy = mat<T>({{1, 2}, {3, 4}, {5, 6}});
  attn::MatrixOf<T> d_table = attn::MatrixOf<T>::Zero(4, 2);
  attn::embedding_backward(std::span<const int>(ids), dy, d_table);
  EXPECT_EQ(d_table, (mat<T>({{3, 4}, {0, 0}, {6, 8}, {0, 0}})));
  attn::embedding_backward(std::span<const int>(ids), dy, d_table);
  EXPECT_EQ(d_table, (mat<T>({{6, 8}, {0, 0}, {12, 16}, {0, 0}})));
}

TEST(EmbeddingBackward, RejectsWrongShapes) {
  const std::vector<int> ids{2, 0, 2};
  Matrix d_table = Matrix::Zero(4, 2);
  EXPECT_TRUE(names(message_of([&] {
                      attn::embedding_backward(std::span<const int>(ids), Matrix(3, 3), d_table);
                    }),
                    "embedding_backward"));  // dy of the wrong width
  EXPECT_TRUE(names(message_of([&] {
                      attn::embedding_backward(std::span<const int>(ids), Matrix(2, 2), d_table);
                    }),
                    "embedding_backward"));  // one row of dy per id
  const std::vector<int> outside{2, 4, 0};
  EXPECT_TRUE(names(message_of([&] {
                      attn::embedding_backward(std::span<const int>(outside),
                                               Matrix(Matrix::Ones(3, 2)), d_table);
                    }),
                    "embedding_backward"));  // id 4 of a 4-row table
  EXPECT_TRUE((d_table.array() == 0).all());
}

TEST(EmbeddingBackward, RejectsADyInsideTheTableItAddsTo) {
  // dy viewing rows of d_table: a row added to early was read later as part of dy.
  Matrix d_table = Matrix::Zero(5, 3);
  const std::vector<int> ids{0, 1};
  const std::string m =
      message_of([&] { attn::embedding_backward<float>(ids, d_table.bottomRows(2), d_table); });
  EXPECT_EQ(m.rfind("embedding_backward: d_table shares memory with dy", 0), 0u) << m;
  EXPECT_TRUE((d_table.array() == 0.0f).all());
  attn::Rng rng(35);
  EXPECT_EQ(message_of([&] { attn::embedding_init(rng, attn::Index{1} << 40, 16); })
                .rfind("embedding_init: vocab 1099511627776 and d_model 16 needs 64.0 TiB of "
                       "parameters; this machine has ",
                       0),
            0u);
}

}  // namespace test_embedding
