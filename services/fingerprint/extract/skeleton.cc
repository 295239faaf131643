#include "services/fingerprint/extract/skeleton.h"

#include <array>
#include <cstdlib>

namespace tessera {
namespace fingerprint {
namespace {

// Ring order P2..P9 from north clockwise: N, NE, E, SE, S, SW, W, NW.
constexpr int kDx[8] = {0, 1, 1, 1, 0, -1, -1, -1};
constexpr int kDy[8] = {-1, -1, 0, 1, 1, 1, 0, -1};

int RingBits(const std::vector<uint8_t>& b, int w, int x, int y) {
  int bits = 0;
  for (int i = 0; i < 8; ++i) bits |= (b[static_cast<size_t>(y + kDy[i]) * w + x + kDx[i]] ? 1 : 0) << i;
  return bits;
}

int Transitions(int bits) {
  int a = 0;
  for (int i = 0; i < 8; ++i) a += !((bits >> i) & 1) && ((bits >> ((i + 1) % 8)) & 1);
  return a;
}

int Popcount(int bits) { return __builtin_popcount(static_cast<unsigned>(bits)); }

// Zhang-Suen deletion tables for the two sub-iterations.
std::array<std::array<uint8_t, 256>, 2> MakeZhangSuenTables() {
  std::array<std::array<uint8_t, 256>, 2> t{};
  for (int bits = 0; bits < 256; ++bits) {
    const auto p = [&](int i) { return (bits >> (i - 2)) & 1; };  // P2..P9
    const int n = Popcount(bits);
    const bool base = n >= 2 && n <= 6 && Transitions(bits) == 1;
    t[0][bits] = base && !(p(2) && p(4) && p(6)) && !(p(4) && p(6) && p(8));
    t[1][bits] = base && !(p(2) && p(4) && p(8)) && !(p(2) && p(6) && p(8));
  }
  return t;
}

// A pixel of a staircase: two perpendicular 4-neighbours set, and its set
// neighbours connected without it (so removing it breaks nothing).
bool Redundant(int bits) {
  const bool n = bits & 1, e = bits & 4, s = bits & 16, w = bits & 64;
  if (!((n && e) || (e && s) || (s && w) || (w && n))) return false;
  // Components of the set ring pixels under 8-adjacency within the ring:
  // consecutive ring pixels touch, and so do the corners' 4-neighbours
  // across a corner (N-E via NE is consecutive already). Count runs, then
  // merge runs joined through a missing corner (e.g. N and E with NE unset).
  int runs = Transitions(bits);
  if (bits == 0xff) return false;
  // Corners at odd indexes: if the corner is unset but both its neighbours
  // (even indexes) are set, those two runs touch (4-neighbours of one corner
  // are diagonal to each other).
  for (int c = 1; c < 8; c += 2) {
    const bool corner = (bits >> c) & 1;
    const bool a = (bits >> (c - 1)) & 1, b = (bits >> ((c + 1) % 8)) & 1;
    if (!corner && a && b) --runs;
  }
  return runs <= 1;
}

}  // namespace

void Thin(std::vector<uint8_t>& b, int w, int h) {
  for (int x = 0; x < w; ++x) b[x] = b[static_cast<size_t>(h - 1) * w + x] = 0;
  for (int y = 0; y < h; ++y) b[static_cast<size_t>(y) * w] = b[static_cast<size_t>(y) * w + w - 1] = 0;
  static const auto tables = MakeZhangSuenTables();  // constant after first use
  std::vector<int> candidates;
  for (int y = 1; y < h - 1; ++y) {
    for (int x = 1; x < w - 1; ++x) {
      if (b[static_cast<size_t>(y) * w + x]) candidates.push_back(y * w + x);
    }
  }
  std::vector<int> remove;
  bool changed = true;
  while (changed) {
    changed = false;
    for (int pass = 0; pass < 2; ++pass) {
      remove.clear();
      for (int i : candidates) {
        if (!b[i]) continue;
        if (tables[pass][RingBits(b, w, i % w, i / w)]) remove.push_back(i);
      }
      for (int i : remove) b[i] = 0;
      changed |= !remove.empty();
    }
    // Keep only pixels still set as candidates.
    size_t k = 0;
    for (int i : candidates) if (b[i]) candidates[k++] = i;
    candidates.resize(k);
  }
  for (int i : candidates) {
    if (b[i] && Redundant(RingBits(b, w, i % w, i / w))) b[i] = 0;
  }
}

bool ZhangSuenDeletes(int pass, int ring_bits) {
  static const auto tables = MakeZhangSuenTables();  // constant after first use
  return tables[pass & 1][ring_bits & 0xff] != 0;
}

bool StaircaseRedundant(int ring_bits) { return Redundant(ring_bits & 0xff); }

int CrossingNumber(const std::vector<uint8_t>& s, int w, int x, int y) {
  const int bits = RingBits(s, w, x, y);
  int changes = 0;
  for (int i = 0; i < 8; ++i) changes += ((bits >> i) & 1) != ((bits >> ((i + 1) % 8)) & 1);
  return changes / 2;
}

std::vector<Point> BranchStarts(const std::vector<uint8_t>& s, int w, int x, int y) {
  const int bits = RingBits(s, w, x, y);
  std::vector<Point> out;
  if (bits == 0 || bits == 0xff) return out;
  // Start just after an unset pixel so runs do not wrap.
  int start = 0;
  while ((bits >> start) & 1) ++start;
  int best = -1;
  for (int k = 1; k <= 8; ++k) {
    const int i = (start + k) % 8;
    const bool set = (bits >> i) & 1;
    if (set && (best < 0 || (best % 2 == 1 && i % 2 == 0))) best = i;  // prefer 4-neighbours (even)
    if (!set && best >= 0) {
      out.push_back({x + kDx[best], y + kDy[best]});
      best = -1;
    }
  }
  if (best >= 0) out.push_back({x + kDx[best], y + kDy[best]});
  return out;
}

std::vector<Point> Neighbours(const std::vector<uint8_t>& s, int w, int h, int x, int y) {
  std::vector<Point> out;
  for (int i = 0; i < 8; ++i) {
    const int xx = x + kDx[i], yy = y + kDy[i];
    if (xx < 0 || yy < 0 || xx >= w || yy >= h) continue;
    if (s[static_cast<size_t>(yy) * w + xx]) out.push_back({xx, yy});
  }
  return out;
}

Trace Walk(const std::vector<uint8_t>& s, int w, int h, Point start, Point first, int max_steps) {
  Trace t;
  Point prev = start, cur = first;
  for (int step = 0; step < max_steps; ++step) {
    t.path.push_back(cur);
    if (cur.x <= 0 || cur.y <= 0 || cur.x >= w - 1 || cur.y >= h - 1) {
      t.dead_end = true;
      return t;
    }
    if (CrossingNumber(s, w, cur.x, cur.y) != 2) {
      t.hit_minutia = true;
      return t;
    }
    // The next pixel: a neighbour that is neither where we came from nor
    // adjacent to it (so a diagonal shortcut does not send us back);
    // 4-neighbours first.
    Point next{-1, -1};
    int best_rank = 3;
    for (const Point& n : Neighbours(s, w, h, cur.x, cur.y)) {
      if (n.x == prev.x && n.y == prev.y) continue;
      if (std::abs(n.x - prev.x) <= 1 && std::abs(n.y - prev.y) <= 1) continue;
      if (n.x == start.x && n.y == start.y) continue;
      const int rank = (n.x == cur.x || n.y == cur.y) ? 1 : 2;
      if (rank < best_rank) best_rank = rank, next = n;
    }
    if (next.x < 0) {
      t.dead_end = true;
      return t;
    }
    prev = cur;
    cur = next;
  }
  return t;
}

}  // namespace fingerprint
}  // namespace tessera
