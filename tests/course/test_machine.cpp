// course::read_measurement_table: how chapters 10 and 11 read the tables of measurements they
// commit. The title line gives the machine and the date, each measurement line goes to the
// chapter's reader, and a line that cannot be read is named by its path and number.
#include "course/machine.hpp"

#include "chapter_run.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <istream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace test_machine {

class MeasurementTableTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = attn_test::scratch("machine",
                              testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path table(const std::string& text) const {
    const fs::path path = dir_ / "measured.tsv";
    std::ofstream(path) << text;
    return path;
  }

  // Keeps "speed" lines of two numbers, refuses everything else.
  bool speed_row(const std::string& kind, std::istream& in) {
    double n = 0, rate = 0;
    if (kind != "speed" || !(in >> n >> rate)) return false;
    rows_.push_back({n, rate});
    return true;
  }

  std::optional<course::TakenOn> read(const fs::path& path) {
    return course::read_measurement_table(
        path, "chapter 99's measurements",
        [this](const std::string& kind, std::istream& in) { return speed_row(kind, in); });
  }

  // The error a read throws, or "" when it throws none.
  std::string error_of(const fs::path& path) {
    try {
      read(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  std::vector<std::vector<double>> rows_;
};

TEST_F(MeasurementTableTest, ReadsTheTitleAndEveryMeasurementLine) {
  // The machine's name holds a comma of its own: the date is what follows the last ", ".
  const auto taken = read(table("# chapter 99's measurements: AMD EPYC, 2 vCPUs, 2026-11-28\n"
                                "# tokens per second\n"
                                "speed\t128\t2150.5\n"
                                "\n"
                                "speed\t256\t1986\n"));
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->machine, "AMD EPYC, 2 vCPUs");
  EXPECT_EQ(taken->date, "2026-11-28");
  EXPECT_EQ(rows_, (std::vector<std::vector<double>>{{128, 2150.5}, {256, 1986}}));
}

TEST_F(MeasurementTableTest, NoFileIsNoTable) {
  EXPECT_FALSE(read(dir_ / "absent.tsv").has_value());
  EXPECT_TRUE(rows_.empty());
}

TEST_F(MeasurementTableTest, ALineTheReaderRefusesIsNamedByPathAndNumber) {
  const fs::path path = table("# chapter 99's measurements: AMD EPYC, 2026-11-28\n"
                              "speed\t128\t2150\n"
                              "speed\t256\n"  // a number short
                              "speed\t512\t1800\n");
  EXPECT_EQ(error_of(path), path.string() + ":3: cannot read 'speed\t256'");
  EXPECT_EQ(error_of(table("# chapter 99's measurements: AMD EPYC, 2026-11-28\n"
                           "sped\t128\t2150\n")),
            path.string() + ":2: cannot read 'sped\t128\t2150'")
      << "an unknown kind";
}

TEST_F(MeasurementTableTest, ATitleWithoutADateOrNoTitleIsAnError) {
  const fs::path dateless = table("# chapter 99's measurements: AMD EPYC\nspeed\t128\t2150\n");
  EXPECT_EQ(error_of(dateless),
            dateless.string() + ":1: cannot read '# chapter 99's measurements: AMD EPYC'");
  // Another chapter's title is a comment here, so this table has none of its own.
  const fs::path other = table("# chapter 10's measurements: AMD EPYC, 2026-11-28\n"
                               "speed\t128\t2150\n");
  EXPECT_NE(error_of(other).find(other.string() + ": no title line"), std::string::npos)
      << error_of(other);
}

}  // namespace test_machine
