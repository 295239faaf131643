#include "services/jobs/job_access.h"

#include <gtest/gtest.h>

namespace tessera::jobs {
namespace {

CallIdentity Caller(const std::string& principal, Role role, const std::string& galleries = "") {
  CallIdentity id;
  id.principal = principal;
  id.role = role;
  if (!galleries.empty()) id.galleries = GalleryGrants::Parse(galleries).value();
  return id;
}

JobRecord Job(const std::string& owner, const std::string& gallery = "") {
  JobRecord job;
  job.job_id = "job-1";
  job.owner = owner;
  job.gallery = gallery;
  return job;
}

TEST(JobAccess, WithoutAuthenticationEveryJobIsEveryones) {
  EXPECT_TRUE(MaySeeJob(CallIdentity(), Job("ada")));
  EXPECT_TRUE(MaySeeJob(CallIdentity(), Job("ada", "national")));
  JobFilter filter;
  EXPECT_TRUE(RestrictListing(CallIdentity(), &filter).ok());
  EXPECT_FALSE(filter.owner.has_value());
}

TEST(JobAccess, PlainJobsAreTheOwnersAndAdmins) {
  EXPECT_TRUE(MaySeeJob(Caller("ada", Role::kReader), Job("ada")));
  EXPECT_FALSE(MaySeeJob(Caller("bob", Role::kEnroller), Job("ada")));
  EXPECT_TRUE(MaySeeJob(Caller("root", Role::kAdmin), Job("ada")));
  // Jobs from before ownership (no owner): admins only.
  EXPECT_FALSE(MaySeeJob(Caller("bob", Role::kEnroller), Job("")));
  EXPECT_TRUE(MaySeeJob(Caller("root", Role::kAdmin), Job("")));
}

TEST(JobAccess, GalleryJobsNeedTheGalleryAtEveryRead) {
  const JobRecord national = Job("root", "national");
  // The issue-31 defect: a reader of "default" and an enroller of another gallery.
  EXPECT_FALSE(MaySeeJob(Caller("rita", Role::kReader), national));
  EXPECT_FALSE(MaySeeJob(Caller("eve", Role::kEnroller, "regional"), national));
  // An admin of another gallery only is not an admin of this one.
  EXPECT_FALSE(MaySeeJob(Caller("ann", Role::kAdmin, "regional"), national));
  EXPECT_TRUE(MaySeeJob(Caller("ann", Role::kAdmin, "national"), national));
  EXPECT_TRUE(MaySeeJob(Caller("ann", Role::kAdmin, "*"), national));
  // A gallery capped below admin: not an admin there.
  EXPECT_FALSE(MaySeeJob(Caller("ann", Role::kAdmin, "national:enroller"), national));
  // The owner, while still granted the gallery; not once the grant is gone.
  const JobRecord own = Job("rita", "national");
  EXPECT_TRUE(MaySeeJob(Caller("rita", Role::kReader, "national:reader"), own));
  EXPECT_FALSE(MaySeeJob(Caller("rita", Role::kReader, "default"), own));
}

TEST(JobAccess, ListingsOfNonAdminsAreTheirOwn) {
  JobFilter filter;
  ASSERT_TRUE(RestrictListing(Caller("rita", Role::kEnroller), &filter).ok());
  EXPECT_EQ(filter.owner, "rita");
  JobFilter other;
  other.owner = "root";
  EXPECT_EQ(RestrictListing(Caller("rita", Role::kEnroller), &other).code(), absl::StatusCode::kPermissionDenied);
  JobFilter admin;
  admin.owner = "rita";
  ASSERT_TRUE(RestrictListing(Caller("root", Role::kAdmin), &admin).ok());
  EXPECT_EQ(admin.owner, "rita");  // admins filter as they like
  JobFilter all;
  ASSERT_TRUE(RestrictListing(Caller("root", Role::kAdmin), &all).ok());
  EXPECT_FALSE(all.owner.has_value());
}

}  // namespace
}  // namespace tessera::jobs
