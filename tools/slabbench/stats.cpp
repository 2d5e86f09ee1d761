// stats.cpp - summaries and Welch's t-test (stats.hpp). Student's t distribution is Boost.Math's.
#include "stats.hpp"

#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace slabbench {

summary summarize(const std::vector<double> &values) {
    summary s;
    s.n = values.size();
    if (values.empty()) return s;
    s.min = *std::min_element(values.begin(), values.end());
    s.max = *std::max_element(values.begin(), values.end());
    s.avg = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.n);
    if (s.n > 1) {
        double sq = 0;
        for (double v : values) sq += (v - s.avg) * (v - s.avg);
        s.sd = std::sqrt(sq / static_cast<double>(s.n - 1));
    }
    return s;
}

double welch_p(const std::vector<double> &a, const std::vector<double> &b) {
    if (a.size() < 2 || b.size() < 2) return std::numeric_limits<double>::quiet_NaN();
    const summary sa = summarize(a), sb = summarize(b);
    const double va = sa.sd * sa.sd / static_cast<double>(sa.n);
    const double vb = sb.sd * sb.sd / static_cast<double>(sb.n);
    if (va + vb == 0) return sa.avg == sb.avg ? 1.0 : 0.0;
    const double t = (sa.avg - sb.avg) / std::sqrt(va + vb);
    // Welch-Satterthwaite degrees of freedom.
    const double df =
        (va + vb) * (va + vb) /
        (va * va / static_cast<double>(sa.n - 1) + vb * vb / static_cast<double>(sb.n - 1));
    const boost::math::students_t dist(df);
    return 2 * boost::math::cdf(boost::math::complement(dist, std::fabs(t)));
}

double pct_better(double avg, double base, better dir) {
    if (base == 0) return std::numeric_limits<double>::quiet_NaN();
    const double change = (avg - base) / base * 100;
    return dir == better::higher ? change : -change;
}

} // namespace slabbench
