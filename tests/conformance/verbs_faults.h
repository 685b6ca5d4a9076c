/* SPDX-License-Identifier: BSD-3-Clause */
/* What the verbs fault test (verbs_faults.c) and its shim share. */
#ifndef RMX_TEST_VERBS_FAULTS_H
#define RMX_TEST_VERBS_FAULTS_H

extern int shim_tag;      /* QPs made from now on are recorded under it */
extern int shim_fail_reg; /* this many memory registrations fail (ENOMEM) */
extern int shim_fake_err; /* moves to the error state do nothing, say 0 */
/* Move the QPs recorded under tag to the error state; how many. */
int shim_silence(int tag);
int shim_qps(int tag);
void shim_forget(void);

#endif
