// The checks' one output line: a check's name and the largest error of `got` against `want`,
// relative to want's largest magnitude.
#pragma once

#include <cmath>
#include <cstdio>
#include <vector>

inline void report(const char *name, const std::vector<double> &want, const float *got) {
  double worst = 0.0, scale = 1e-30;
  for (double w : want)
    scale = std::fmax(scale, std::fabs(w));
  for (std::size_t k = 0; k < want.size(); ++k)
    worst = std::fmax(worst, std::fabs(want[k] - double(got[k])) / scale);
  std::printf("%s %.3g\n", name, worst);
}
